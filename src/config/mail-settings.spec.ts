import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig } from './app-config';
import { emailAccountsOf, senderAllowed, type MailSettingsSource } from './mail-settings';

const ACCOUNT = {
  name: 'reports',
  mailbox: 'imaps://jobs@mail.example.com/Jobs%20In',
  passwordEnv: 'MAIL_PASSWORD',
  application: 'reports',
  replyFrom: 'jobs@example.com',
};

function source(
  accounts: unknown,
  smtpUrl: string | null = 'smtp://smtp.example.com',
): MailSettingsSource {
  return {
    emailAccounts: accounts,
    smtpUrl,
    adminEmail: null,
    emailFrom: null,
    emailAttachMaxBytes: 1000,
  };
}

describe('EMAIL_ACCOUNTS', () => {
  it('takes an account apart, with defaults, and reads its password from the environment', () => {
    const { problems, accounts } = emailAccountsOf(source([ACCOUNT]), { MAIL_PASSWORD: 'pw-1' });
    expect(problems).toEqual([]);
    expect(accounts[0]).toMatchObject({
      name: 'reports',
      protocol: 'imap',
      secure: true,
      host: 'mail.example.com',
      port: 993,
      user: 'jobs',
      folder: 'Jobs In',
      pollMs: 60_000,
      attachMaxBytes: 1000,
      allowedSenders: null,
      jobConfiguration: null,
      replyTemplate: null,
      requireAuthenticationResults: null,
      maxParts: 100,
      maxReplyRecipients: 5,
      failedFolder: null,
    });
    expect(accounts[0].password).toBe('pw-1');
    // Never serialised, so never logged or shown with the settings.
    expect(JSON.stringify(accounts[0])).not.toContain('pw-1');
    expect(Object.keys(accounts[0])).not.toContain('password');
  });

  it('reads a password file and knows the POP3 ports', () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-mail-settings-'));
    try {
      writeFileSync(join(dir, 'password'), 'from-file\n');
      const { problems, accounts } = emailAccountsOf(
        source([
          {
            ...ACCOUNT,
            mailbox: 'pop3://jobs@pop.example.com',
            passwordEnv: undefined,
            passwordFile: join(dir, 'password'),
          },
        ]),
        {},
      );
      expect(problems).toEqual([]);
      expect(accounts[0]).toMatchObject({ protocol: 'pop3', secure: false, port: 110 });
      expect(accounts[0].password).toBe('from-file');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('names each problem with the account, and never shows a password', () => {
    const { problems } = emailAccountsOf(
      source(
        [
          { ...ACCOUNT, mailbox: 'imap://jobs:hunter2@mail.example.com' },
          { ...ACCOUNT, name: 'b', mailbox: 'http://mail.example.com', pollSeconds: 0, colour: 1 },
          { ...ACCOUNT, name: 'c', passwordEnv: 'UNSET_VARIABLE', replyFrom: 'nobody' },
          { ...ACCOUNT, name: 'd', passwordFile: '/x', jobConfiguration: '../etc/passwd' },
        ],
        null,
      ),
      { MAIL_PASSWORD: 'pw' },
    );
    expect(problems).toEqual([
      'EMAIL_ACCOUNTS[0] "reports": the mailbox URL holds a password; remove it and give passwordEnv or passwordFile',
      'EMAIL_ACCOUNTS[1] "b": unknown setting "colour" (known: name, mailbox, passwordEnv, passwordFile, application, pollSeconds, replyFrom, jobConfiguration, replyTemplate, attachMaxBytes, allowedSenders, requireAuthenticationResults, maxParts, maxReplyRecipients, failedFolder)',
      'EMAIL_ACCOUNTS[1] "b": pollSeconds must be a whole number >= 1',
      'EMAIL_ACCOUNTS[1] "b": mailbox must be a URL such as imaps://jobs@mail.example.com/INBOX or pop3s://jobs@mail.example.com (scheme imap, imaps, pop3 or pop3s, with the user)',
      'EMAIL_ACCOUNTS[2] "c": replyFrom must be an e-mail address such as jobs@example.com',
      'EMAIL_ACCOUNTS[2] "c": the environment variable UNSET_VARIABLE (passwordEnv) is not set',
      'EMAIL_ACCOUNTS[3] "d": jobConfiguration must be the name of a file of the application\'s catalog',
      'EMAIL_ACCOUNTS[3] "d": give the mailbox password as exactly one of passwordEnv (a variable\'s name) or passwordFile (a path)',
      'SMTP_URL: must be set when EMAIL_ACCOUNTS has accounts (replies are sent by it)',
    ]);
    expect(problems.join('\n')).not.toContain('hunter2');
  });

  it('checks the limits and trust settings of an account', () => {
    const { problems, accounts } = emailAccountsOf(
      source([
        {
          ...ACCOUNT,
          requireAuthenticationResults: 'mx.example.com',
          maxParts: 20,
          maxReplyRecipients: 1,
          failedFolder: 'Refused',
        },
        { ...ACCOUNT, name: 'b', maxParts: 0, maxReplyRecipients: 1.5 },
        { ...ACCOUNT, name: 'c', requireAuthenticationResults: 'mx.example.com; spf=pass' },
        { ...ACCOUNT, name: 'd', mailbox: 'pop3://jobs@pop.example.com', failedFolder: 'Refused' },
      ]),
      { MAIL_PASSWORD: 'pw' },
    );
    expect(accounts[0]).toMatchObject({
      requireAuthenticationResults: 'mx.example.com',
      maxParts: 20,
      maxReplyRecipients: 1,
      failedFolder: 'Refused',
    });
    expect(problems).toEqual([
      'EMAIL_ACCOUNTS[1] "b": maxParts must be a whole number >= 1',
      'EMAIL_ACCOUNTS[1] "b": maxReplyRecipients must be a whole number >= 1',
      'EMAIL_ACCOUNTS[2] "c": requireAuthenticationResults must be the authserv-id of your mail server\'s Authentication-Results, such as mx.example.com',
      'EMAIL_ACCOUNTS[3] "d": failedFolder is for IMAP mailboxes; a POP3 mailbox deletes what it cannot take',
    ]);
  });

  it('keeps the name "job" for results sent at other modules\' request', () => {
    const { problems } = emailAccountsOf(source([{ ...ACCOUNT, name: 'job' }]), {
      MAIL_PASSWORD: 'pw',
    });
    expect(problems).toEqual([
      'EMAIL_ACCOUNTS[0] "job": the name "job" is reserved; choose another',
    ]);
  });

  it('refuses a name given twice', () => {
    const { problems } = emailAccountsOf(source([ACCOUNT, ACCOUNT]), { MAIL_PASSWORD: 'pw' });
    expect(problems).toEqual(['EMAIL_ACCOUNTS[1] "reports": the name "reports" is given twice']);
  });

  it("checks EMAIL_FROM, the sender of results sent at other modules' request", () => {
    expect(loadConfig({ EMAIL_FROM: 'reports@example.com' }).emailFrom).toBe('reports@example.com');
    expect(loadConfig({}).emailFrom).toBeNull();
    for (const bad of [
      'reports',
      'Reports <reports@example.com>',
      'a@example.com, b@example.com',
    ]) {
      expect(() => loadConfig({ EMAIL_FROM: bad })).toThrow(
        'EMAIL_FROM: must be an e-mail address such as jobs@example.com',
      );
    }
  });

  it('stops the start-up with the problems, the environment read like every setting', () => {
    expect(() => loadConfig({ EMAIL_ACCOUNTS: '{"not":"a list"}' })).toThrow(
      'EMAIL_ACCOUNTS: must be a JSON list of accounts',
    );
    expect(() => loadConfig({ EMAIL_ACCOUNTS: JSON.stringify([ACCOUNT]) })).toThrow(ConfigError);
    const config = loadConfig({
      EMAIL_ACCOUNTS: JSON.stringify([ACCOUNT]),
      MAIL_PASSWORD: 'pw',
      SMTP_URL: 'smtps://jobs@smtp.example.com:465',
    });
    expect(config.mailAccounts.map((a) => a.name)).toEqual(['reports']);
    expect(() => loadConfig({ SMTP_URL: 'smtps://jobs:secret@smtp.example.com' })).toThrow(
      /SMTP_URL=.*must be a URL such as smtps:\/\/jobs@smtp\.example\.com:465 \(no password: SMTP_PASSWORD\)/,
    );
  });
});

describe('allowedSenders', () => {
  const account = (allowedSenders: string[] | null) =>
    ({ allowedSenders }) as Parameters<typeof senderAllowed>[0];

  it('takes anyone without a list, else listed addresses and @domains, whatever their case', () => {
    expect(senderAllowed(account(null), 'anyone@anywhere.org')).toBe(true);
    const listed = account(['boss@example.org', '@example.com']);
    expect(senderAllowed(listed, 'Boss@Example.org')).toBe(true);
    expect(senderAllowed(listed, 'a@example.com')).toBe(true);
    expect(senderAllowed(listed, 'a@notexample.com')).toBe(false);
    expect(senderAllowed(listed, 'a@example.com.evil.org')).toBe(false);
  });
});
