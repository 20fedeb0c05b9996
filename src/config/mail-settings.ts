import { readFileSync } from 'node:fs';

/**
 * One mailbox of EMAIL_ACCOUNTS (docs/operations.md#jobs-by-e-mail): its messages become jobs
 * of `application`, and their replies are sent from `replyFrom`. The mailbox URL names the user
 * but never the password: that comes from the environment variable `passwordEnv` or the file
 * `passwordFile` (a mounted secret), so that the settings can be shown and logged.
 */
export interface EmailAccountSetting {
  /** Names the account in logs and in the mail_reply keys; unique. */
  name: string;
  /** imap://user@host[:port][/folder], imaps://…, pop3://user@host[:port], pop3s://… */
  mailbox: string;
  passwordEnv?: string;
  passwordFile?: string;
  application: string;
  /** Seconds between two looks into the mailbox (default 60). */
  pollSeconds?: number;
  /** The From of the replies. */
  replyFrom: string;
  /** A file of the application's catalog (JOB_CONFIGURATIONS): meta every job of the account gets. */
  jobConfiguration?: string;
  /** A file of the application's catalog (EMAIL_REPLIES): the text of the replies. */
  replyTemplate?: string;
  /** Results larger than this (bytes) are linked instead of attached (default EMAIL_ATTACH_MAX_BYTES). */
  attachMaxBytes?: number;
  /** Addresses or @domains allowed to send jobs; unset: anyone who can write to the mailbox. */
  allowedSenders?: string[];
  /**
   * The authserv-id of the operator's own mail server: a message is taken only with a DMARC (or
   * aligned DKIM) pass for its From domain in the topmost Authentication-Results of that id.
   */
  requireAuthenticationResults?: string;
  /** The most MIME parts (the message itself included) a message may have (default 100). */
  maxParts?: number;
  /** The most recipients (To and Cc) of one reply (default 5). */
  maxReplyRecipients?: number;
  /** IMAP only: the folder messages that are not jobs are moved to; unset: they are deleted. */
  failedFolder?: string;
}

export type MailboxProtocol = 'imap' | 'pop3';

/** An account ready to use: its URL taken apart and its password read. */
export interface EmailAccount {
  name: string;
  protocol: MailboxProtocol;
  secure: boolean;
  host: string;
  port: number;
  user: string;
  password: string;
  /** IMAP only: the folder polled (default INBOX). */
  folder: string;
  application: string;
  pollMs: number;
  replyFrom: string;
  jobConfiguration: string | null;
  replyTemplate: string | null;
  attachMaxBytes: number;
  allowedSenders: string[] | null;
  requireAuthenticationResults: string | null;
  maxParts: number;
  maxReplyRecipients: number;
  failedFolder: string | null;
}

/** mail_reply's source of results sent at another module's request: no account may be named so. */
export const RESULT_MAIL_SOURCE = 'job';

const PORTS: Record<string, number> = { imap: 143, imaps: 993, pop3: 110, pop3s: 995 };
const FIELDS = new Set([
  'name',
  'mailbox',
  'passwordEnv',
  'passwordFile',
  'application',
  'pollSeconds',
  'replyFrom',
  'jobConfiguration',
  'replyTemplate',
  'attachMaxBytes',
  'allowedSenders',
  'requireAuthenticationResults',
  'maxParts',
  'maxReplyRecipients',
  'failedFolder',
]);
/** An authserv-id (RFC 8601): a token such as mx.example.com. */
const AUTHSERV_ID = /^[A-Za-z0-9][A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{0,254}$/;
const ADDRESS = /^[^\s@<>]+@[^\s@<>]+$/;
/**
 * A plain address (no display name, no list): the local part's usual characters, a host name.
 * Strict because such an address becomes a header and a recipient: no comma, quote or space.
 */
const PLAIN_ADDRESS =
  /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/** Whether `value` is one plain e-mail address such as jobs@example.com (at most 254 characters). */
export function isEmailAddress(value: string): boolean {
  return value.length <= 254 && PLAIN_ADDRESS.test(value);
}
const CATALOG_NAME = /^[^/\\\s][^/\\]{0,254}$/;

export interface MailSettingsSource {
  emailAccounts: unknown;
  smtpUrl: string | null;
  adminEmail: string | null;
  emailFrom: string | null;
  emailAttachMaxBytes: number;
}

function problemsOfAccount(
  entry: unknown,
  where: string,
  env: NodeJS.ProcessEnv,
  source: MailSettingsSource,
): { problems: string[]; account: EmailAccount | null } {
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) {
    return { problems: [`${where}: must be an object`], account: null };
  }
  const e = entry as Record<string, unknown>;
  const problems: string[] = [];
  for (const key of Object.keys(e)) {
    if (!FIELDS.has(key)) {
      problems.push(`${where}: unknown setting "${key}" (known: ${[...FIELDS].join(', ')})`);
    }
  }
  if (typeof e.name !== 'string' || !/^[\w.-]{1,64}$/.test(e.name)) {
    problems.push(`${where}: name must be 1 to 64 letters, digits, ".", "-" or "_"`);
  } else if (e.name === RESULT_MAIL_SOURCE) {
    problems.push(`${where}: the name "${RESULT_MAIL_SOURCE}" is reserved; choose another`);
  }
  if (typeof e.application !== 'string' || !/^\w{1,64}$/.test(e.application)) {
    problems.push(`${where}: application must be an application name`);
  }
  if (typeof e.replyFrom !== 'string' || !ADDRESS.test(e.replyFrom)) {
    problems.push(`${where}: replyFrom must be an e-mail address such as jobs@example.com`);
  }
  if (
    e.pollSeconds !== undefined &&
    !(Number.isInteger(e.pollSeconds) && (e.pollSeconds as number) >= 1)
  ) {
    problems.push(`${where}: pollSeconds must be a whole number >= 1`);
  }
  if (
    e.attachMaxBytes !== undefined &&
    !(Number.isInteger(e.attachMaxBytes) && (e.attachMaxBytes as number) >= 0)
  ) {
    problems.push(`${where}: attachMaxBytes must be a whole number >= 0`);
  }
  if (
    e.allowedSenders !== undefined &&
    !(
      Array.isArray(e.allowedSenders) &&
      e.allowedSenders.every((s) => typeof s === 'string' && /^[^\s<>]*@[^\s@<>]+$/.test(s))
    )
  ) {
    problems.push(`${where}: allowedSenders must be a list of addresses or @domains`);
  }
  for (const field of ['maxParts', 'maxReplyRecipients'] as const) {
    if (e[field] !== undefined && !(Number.isInteger(e[field]) && (e[field] as number) >= 1)) {
      problems.push(`${where}: ${field} must be a whole number >= 1`);
    }
  }
  if (
    e.requireAuthenticationResults !== undefined &&
    !(
      typeof e.requireAuthenticationResults === 'string' &&
      AUTHSERV_ID.test(e.requireAuthenticationResults)
    )
  ) {
    problems.push(
      `${where}: requireAuthenticationResults must be the authserv-id of your mail server's Authentication-Results, such as mx.example.com`,
    );
  }
  if (
    e.failedFolder !== undefined &&
    !(
      typeof e.failedFolder === 'string' &&
      /^[^*%]{1,255}$/.test(e.failedFolder) &&
      [...e.failedFolder].every((c) => c >= ' ')
    )
  ) {
    problems.push(`${where}: failedFolder must be the name of an IMAP folder`);
  }
  for (const field of ['jobConfiguration', 'replyTemplate'] as const) {
    if (e[field] !== undefined && !(typeof e[field] === 'string' && CATALOG_NAME.test(e[field]))) {
      problems.push(`${where}: ${field} must be the name of a file of the application's catalog`);
    }
  }
  let url: URL | null = null;
  try {
    url = typeof e.mailbox === 'string' ? new URL(e.mailbox) : null;
  } catch {
    url = null;
  }
  const scheme = url?.protocol.slice(0, -1) ?? '';
  if (url === null || !(scheme in PORTS) || url.hostname === '' || url.username === '') {
    problems.push(
      `${where}: mailbox must be a URL such as imaps://jobs@mail.example.com/INBOX or pop3s://jobs@mail.example.com (scheme imap, imaps, pop3 or pop3s, with the user)`,
    );
    url = null;
  } else if (url.password !== '') {
    problems.push(
      `${where}: the mailbox URL holds a password; remove it and give passwordEnv or passwordFile`,
    );
  }
  if (e.failedFolder !== undefined && url !== null && !scheme.startsWith('imap')) {
    problems.push(
      `${where}: failedFolder is for IMAP mailboxes; a POP3 mailbox deletes what it cannot take`,
    );
  }
  let password: string | null = null;
  if (typeof e.passwordEnv === 'string' && e.passwordFile === undefined) {
    password = env[e.passwordEnv] ?? null;
    if (password === null) {
      problems.push(`${where}: the environment variable ${e.passwordEnv} (passwordEnv) is not set`);
    }
  } else if (typeof e.passwordFile === 'string' && e.passwordEnv === undefined) {
    try {
      password = readFileSync(e.passwordFile, 'utf8').replace(/\r?\n$/, '');
    } catch (error) {
      problems.push(
        `${where}: passwordFile ${e.passwordFile} cannot be read (${(error as NodeJS.ErrnoException).code})`,
      );
    }
  } else {
    problems.push(
      `${where}: give the mailbox password as exactly one of passwordEnv (a variable's name) or passwordFile (a path)`,
    );
  }
  if (problems.length > 0 || url === null || password === null) {
    return { problems, account: null };
  }
  const folder = decodeURIComponent(url.pathname.replace(/^\/+/, '')) || 'INBOX';
  const account: Omit<EmailAccount, 'password'> = {
    name: e.name as string,
    protocol: scheme.startsWith('imap') ? 'imap' : 'pop3',
    secure: scheme.endsWith('s'),
    host: url.hostname,
    port: url.port === '' ? PORTS[scheme] : Number(url.port),
    user: decodeURIComponent(url.username),
    folder,
    application: e.application as string,
    pollMs: ((e.pollSeconds as number | undefined) ?? 60) * 1000,
    replyFrom: e.replyFrom as string,
    jobConfiguration: (e.jobConfiguration as string | undefined) ?? null,
    replyTemplate: (e.replyTemplate as string | undefined) ?? null,
    attachMaxBytes: (e.attachMaxBytes as number | undefined) ?? source.emailAttachMaxBytes,
    allowedSenders: (e.allowedSenders as string[] | undefined) ?? null,
    requireAuthenticationResults: (e.requireAuthenticationResults as string | undefined) ?? null,
    maxParts: (e.maxParts as number | undefined) ?? 100,
    maxReplyRecipients: (e.maxReplyRecipients as number | undefined) ?? 5,
    failedFolder: (e.failedFolder as string | undefined) ?? null,
  };
  // Not enumerable: the account can be shown, logged or serialised without it.
  Object.defineProperty(account, 'password', { value: password, enumerable: false });
  return { problems, account: account as EmailAccount };
}

/**
 * EMAIL_ACCOUNTS, SMTP_URL and ADMIN_EMAIL checked together: one line per problem, each naming
 * the setting (and the account) to fix; never a password.
 */
export function emailAccountsOf(
  source: MailSettingsSource,
  env: NodeJS.ProcessEnv = process.env,
): { problems: string[]; accounts: EmailAccount[] } {
  const raw = source.emailAccounts;
  if (!Array.isArray(raw)) {
    return { problems: ['EMAIL_ACCOUNTS: must be a JSON list of accounts'], accounts: [] };
  }
  const problems: string[] = [];
  const accounts: EmailAccount[] = [];
  const names = new Set<string>();
  raw.forEach((entry, index) => {
    const label = (entry as { name?: unknown } | null)?.name;
    const where = `EMAIL_ACCOUNTS[${index}]${typeof label === 'string' ? ` "${label}"` : ''}`;
    const checked = problemsOfAccount(entry, where, env, source);
    problems.push(...checked.problems);
    if (checked.account !== null) {
      if (names.has(checked.account.name)) {
        problems.push(`${where}: the name "${checked.account.name}" is given twice`);
      }
      names.add(checked.account.name);
      accounts.push(checked.account);
    }
  });
  if (raw.length > 0 && source.smtpUrl === null) {
    problems.push(
      'SMTP_URL: must be set when EMAIL_ACCOUNTS has accounts (replies are sent by it)',
    );
  }
  if (source.adminEmail !== null && !ADDRESS.test(source.adminEmail)) {
    problems.push('ADMIN_EMAIL: must be an e-mail address such as ops@example.com');
  }
  if (source.emailFrom !== null && !isEmailAddress(source.emailFrom)) {
    problems.push('EMAIL_FROM: must be an e-mail address such as jobs@example.com');
  }
  return { problems, accounts };
}

/** Whether `address` may send jobs to `account` (its allowedSenders: addresses or @domains). */
export function senderAllowed(account: EmailAccount, address: string): boolean {
  if (account.allowedSenders === null) {
    return true;
  }
  const lower = address.toLowerCase();
  return account.allowedSenders.some((allowed) =>
    allowed.startsWith('@')
      ? lower.endsWith(allowed.toLowerCase())
      : lower === allowed.toLowerCase(),
  );
}
