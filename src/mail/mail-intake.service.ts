import { randomUUID } from 'node:crypto';
import {
  BeforeApplicationShutdown,
  Injectable,
  Logger,
  OnApplicationBootstrap,
} from '@nestjs/common';
import { AddressObject, ParsedMail, simpleParser } from 'mailparser';
import { auditRowJson } from '../audit/audit.repository';
import { AuditService } from '../audit/audit.service';
import { CatalogService } from '../catalog/catalog.service';
import { ApiError } from '../common/api-error';
import { IntakeLimitsConfig, MailConfig } from '../config/config-slices';
import { EmailAccount, senderAllowed } from '../config/mail-settings';
import { isDuplicateKey } from '../storage/query-rows';
import { CONFIGURATION_FILE, JobMeta } from '../job-core/job-input';
import { parseConfigurationFile } from '../job-core/job-meta';
import { IntakePart, JobsService } from '../jobs/jobs.service';
import { MailReplyState } from '../mail-replies/mail-reply.entity';
import { MailReplyRepository, ReplyAddressing } from '../mail-replies/mail-reply.repository';
import { MailReplyService } from '../mail-replies/mail-reply.service';
import { fromDomainPassed } from './authentication-results';
import { MailboxSession, openMailbox, WaitingMessage } from './mailbox';
import { JobSource } from '../queue/queue.types';

/** A MIME part's header larger than this is not read (the parser's maxHeadSize). */
const MAX_PART_HEADER_BYTES = 256 * 1024;
/** The body text kept as emailBody: configuration.txt is no place for a whole newsletter. */
const BODY_MAX_CHARS = 64 * 1024;
/** Settled records are kept this long: a message still in its mailbox then would run again. */
const RECORD_RETENTION_DAYS = 30;
const CLEANUP_EVERY_MS = 3_600_000;

function addresses(field: AddressObject | AddressObject[] | undefined): string[] {
  const objects = field === undefined ? [] : Array.isArray(field) ? field : [field];
  return objects.flatMap((o) => o.value.map((v) => v.address ?? '')).filter((a) => a !== '');
}

/** The job a message asks for, or why it is not one, with where the reply goes (if anywhere). */
interface MessageOutcome {
  addressing: ReplyAddressing;
  rejection: string | null;
  /** The From the message claims, for the log and the audit trail. */
  claimedFrom: string | null;
}

/** A message's header and body as the parser took them, or why it could not. */
type Parsed = { mail: ParsedMail; error: null } | { mail: null; error: string };

/** Addresses compared as mail servers do in practice: the same letters, any case. */
function sameAddress(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}

/**
 * Polls the mailboxes of EMAIL_ACCOUNTS (docs/operations.md#jobs-by-e-mail): each message is
 * recorded in mail_reply under the job id it will get, submitted through JobsService like any
 * other job (its attachments are the parts, ZIPs unpacked under the REST rules), and only then
 * removed from the mailbox. A node that dies in between leaves the record: whichever node sees
 * the message next submits under the recorded job id (a second job cannot be stored) or, the job
 * being stored, only removes the message. So each message is one job, whatever the nodes.
 */
@Injectable()
export class MailIntakeService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('MailIntake');
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly passes = new Set<Promise<void>>();
  private stopped = false;
  private lastCleanup = 0;

  constructor(
    private readonly config: MailConfig,
    private readonly limits: IntakeLimitsConfig,
    private readonly jobs: JobsService,
    private readonly records: MailReplyRepository,
    private readonly replies: MailReplyService,
    private readonly catalog: CatalogService,
    private readonly audit: AuditService,
  ) {}

  /**
   * The account's job configuration from the application's catalog, read for each message so
   * that a catalog change applies at once. Missing, it is the operator's mistake, not the
   * sender's: the message waits in the mailbox (logged) until the file is there.
   */
  private async accountMeta(account: EmailAccount): Promise<JobMeta> {
    if (account.jobConfiguration === null) {
      return {};
    }
    const content = await this.catalog.getFile(
      account.application,
      'JOB_CONFIGURATIONS',
      account.jobConfiguration,
    );
    if (content === null) {
      throw new Error(
        `the job configuration ${account.jobConfiguration} is not in the JOB_CONFIGURATIONS of application ${account.application}; messages wait until it is`,
      );
    }
    return parseConfigurationFile(content);
  }

  onApplicationBootstrap(): void {
    const accounts = this.config.mailAccounts;
    if (accounts.length === 0) {
      return;
    }
    this.logger.log(
      `polling ${accounts.map((a) => `${a.name} (${a.protocol}://${a.user}@${a.host}:${a.port}) for ${a.application}`).join(', ')}`,
    );
    for (const account of accounts) {
      this.schedule(account, 0);
    }
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    this.timers.forEach((timer) => clearTimeout(timer));
    await Promise.all(this.passes);
  }

  private schedule(account: EmailAccount, delayMs: number): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      const pass = this.poll(account).finally(() => {
        this.passes.delete(pass);
        if (!this.stopped) {
          this.schedule(account, account.pollMs);
        }
      });
      this.passes.add(pass);
    }, delayMs);
    this.timers.add(timer);
  }

  /** One look into an account's mailbox; a failure is logged and the next look tries again. */
  async poll(account: EmailAccount): Promise<void> {
    let session: MailboxSession | null = null;
    try {
      session = await openMailbox(account);
      for (const message of await session.waiting()) {
        if (this.stopped) {
          break;
        }
        try {
          await this.take(account, session, message);
        } catch (error) {
          // This message's trouble (the database, the mailbox, a missing job configuration)
          // is no stop of the poll: the later messages are taken, this one again next time.
          if (!session.usable()) {
            throw error;
          }
          this.logger.warn(
            `mailbox ${account.name}: message ${message.key}: ${(error as Error).message}; trying it again in ${account.pollMs / 1000} s`,
          );
        }
      }
    } catch (error) {
      // imapflow's message is generic ("Command failed"); the server's own words are beside it.
      const server = (error as { responseText?: unknown }).responseText;
      const detail = typeof server === 'string' ? ` (${server})` : '';
      this.logger.warn(
        `mailbox ${account.name}: ${(error as Error).message}${detail}; trying again in ${account.pollMs / 1000} s`,
      );
    } finally {
      await session?.close().catch(() => undefined);
    }
    if (Date.now() - this.lastCleanup >= CLEANUP_EVERY_MS) {
      this.lastCleanup = Date.now();
      await this.records.deleteOlderThan(RECORD_RETENTION_DAYS).catch(() => undefined);
    }
  }

  /**
   * Turns one message into its job (or its refusal) once, then removes it from the mailbox; a
   * message that is not a job is set aside (the account's failedFolder) instead. A message the
   * parser cannot take is refused like any other: settled once, never tried again.
   */
  private async take(
    account: EmailAccount,
    session: MailboxSession,
    message: WaitingMessage,
  ): Promise<void> {
    const record = await this.records.record(
      account.name,
      message.key,
      account.application,
      randomUUID(),
      account.replyFrom,
    );
    let refused = record.refused;
    if (record.state === MailReplyState.RECEIVED) {
      const outcome = await this.outcomeOf(account, session, message, record.jobId);
      refused = outcome.rejection !== null;
      const audit = refused
        ? auditRowJson(
            this.audit.rowOf(
              {
                action: 'mail.refused',
                applicationName: account.application,
                outcome: 'failure',
                details: {
                  account: account.name,
                  message: message.key,
                  from: outcome.claimedFrom,
                  reason: outcome.rejection,
                  replyTo: outcome.addressing.replyTo,
                },
              },
              // Nobody authenticated: a From is the sender's word, kept in the details.
              { principal: null, authMethod: JobSource.EMAIL },
            ),
          )
        : null;
      const settled = await this.records.settle(
        account.name,
        message.key,
        outcome.addressing,
        outcome.rejection,
        audit,
      );
      if (settled) {
        const from = outcome.claimedFrom ?? 'no From';
        this.logger.log(
          outcome.rejection === null
            ? `mailbox ${account.name}: message ${message.key} (${from}) is job ${record.jobId}`
            : `mailbox ${account.name}: message ${message.key} (${from}) refused, ${outcome.addressing.replyTo === null ? 'no reply' : `reply to ${outcome.addressing.replyTo}`}: ${outcome.rejection}`,
        );
      }
      this.replies.wake();
    }
    // Only now: the job (or the refusal and its reply) is stored.
    await (refused
      ? session.setAside(message.key, account.failedFolder)
      : session.remove(message.key));
  }

  /** The message's bytes parsed within the account's limits, or the parser's complaint. */
  private async parse(account: EmailAccount, raw: Buffer): Promise<Parsed> {
    try {
      const mail = await simpleParser(raw, {
        skipTextToHtml: true,
        skipImageLinks: true,
        maxChildNodes: account.maxParts,
        maxHeadSize: MAX_PART_HEADER_BYTES,
        checksumAlgo: false,
      });
      return { mail, error: null };
    } catch (error) {
      return { mail: null, error: (error as Error).message };
    }
  }

  /**
   * What becomes of a message. Limits the mailbox tells before reading (the size; on IMAP the
   * count of MIME parts) are checked first, and such a message's header alone is read; the
   * parser's own limits (parts, a part's header) end a parse that crosses them.
   */
  private async outcomeOf(
    account: EmailAccount,
    session: MailboxSession,
    message: WaitingMessage,
    jobId: string,
  ): Promise<MessageOutcome> {
    const limit = this.limits.maxRequestBytes;
    let unreadable: string | null = null;
    if (message.size > limit) {
      unreadable = `The message has ${message.size} bytes, more than the limit of ${limit} (MAX_REQUEST_BYTES).`;
    } else if (message.parts !== null && message.parts > account.maxParts) {
      unreadable = `The message has ${message.parts} MIME parts, more than the limit of ${account.maxParts} (maxParts).`;
    }
    let parsed: Parsed = { mail: null, error: 'not read' };
    if (unreadable === null) {
      const raw = await session.read(message.key);
      parsed = await this.parse(account, raw);
      if (raw.length > limit) {
        unreadable = `The message has ${raw.length} bytes, more than the limit of ${limit} (MAX_REQUEST_BYTES).`;
      } else if (parsed.error !== null) {
        unreadable = `The message cannot be read: ${parsed.error}.`;
      }
    }
    if (unreadable !== null) {
      // Its header alone says who sent it and where a refusal may go.
      parsed = await this.parse(account, await session.readHeader(message.key));
    }
    if (parsed.mail === null) {
      return {
        addressing: this.addressing(account, null, null, [], ''),
        rejection: `The message cannot be read: ${parsed.error}.`,
        claimedFrom: null,
      };
    }
    return this.judge(account, parsed.mail, unreadable, jobId);
  }

  /**
   * The reply's addressing: only addresses `allowedSenders` allows, the Reply-To if it is one
   * (else the From), then the Cc, at most `maxReplyRecipients` in all. A null `to`: no reply.
   */
  private addressing(
    account: EmailAccount,
    mail: ParsedMail | null,
    to: string | null,
    cc: string[],
    subject: string,
  ): ReplyAddressing {
    const recipients: string[] = [];
    for (const address of to === null ? [] : [to, ...cc]) {
      if (
        recipients.length < account.maxReplyRecipients &&
        senderAllowed(account, address) &&
        !recipients.some((r) => sameAddress(r, address))
      ) {
        recipients.push(address);
      }
    }
    return {
      replyTo: recipients[0] ?? null,
      cc: recipients.slice(1).join(', ') || null,
      subject: `RE: ${subject}`,
      from: account.replyFrom,
      inReplyTo: mail?.messageId ?? null,
      attachMaxBytes: account.attachMaxBytes,
    };
  }

  /**
   * Whether the message's sender is trusted (allowedSenders, and the operator's server's
   * Authentication-Results where required): a reason to refuse without any reply, or null.
   */
  private untrusted(account: EmailAccount, mail: ParsedMail, from: string | null): string | null {
    if (from === null) {
      return 'The message has no From address.';
    }
    if (!senderAllowed(account, from)) {
      return `${from} may not send jobs of application ${account.application}.`;
    }
    const authservId = account.requireAuthenticationResults;
    if (authservId !== null) {
      const values = mail.headerLines
        .filter((h) => h.key === 'authentication-results')
        .map((h) => h.line.slice(h.line.indexOf(':') + 1));
      const domain = from.slice(from.lastIndexOf('@') + 1);
      if (!fromDomainPassed(values, authservId, domain)) {
        return `The message has no DMARC or DKIM pass for ${domain} from ${authservId} (requireAuthenticationResults).`;
      }
    }
    return null;
  }

  private async judge(
    account: EmailAccount,
    mail: ParsedMail,
    unreadable: string | null,
    jobId: string,
  ): Promise<MessageOutcome> {
    const from = addresses(mail.from)[0] ?? null;
    const subject = mail.subject ?? '';
    const distrust = this.untrusted(account, mail, from);
    if (distrust !== null || from === null) {
      // No mail to anyone a message names that is not vouched for: no relay, no backscatter.
      return {
        addressing: this.addressing(account, mail, null, [], subject),
        rejection: distrust ?? 'The message has no From address.',
        claimedFrom: from,
      };
    }
    const replyTo = addresses(mail.replyTo).find((a) => senderAllowed(account, a)) ?? from;
    const addressing = this.addressing(account, mail, replyTo, addresses(mail.cc), subject);
    const refuse = (rejection: string): MessageOutcome => ({
      addressing,
      rejection,
      claimedFrom: from,
    });
    if (unreadable !== null) {
      return refuse(unreadable);
    }
    if (!contentTypeOf(mail).startsWith('multipart/')) {
      return refuse(
        'The message is not multipart: attach the R script (.R), a ZIP archive, or the data files with a configuration.txt.',
      );
    }
    const files = mail.attachments.filter((a) => a.filename !== undefined && a.filename !== '');
    if (files.length === 0) {
      return refuse(
        'The message has no attachment: attach the R script (.R), a ZIP archive, or the data files with a configuration.txt.',
      );
    }
    const parts: IntakePart[] = files.map((attachment) => ({
      name: attachment.filename as string,
      label: `The attachment "${attachment.filename as string}"`,
      content: attachment.content,
      zip:
        /\.zip$/i.test(attachment.filename as string) ||
        attachment.contentType === 'application/zip',
    }));
    try {
      const attachedConfiguration = files.find((a) => a.filename === CONFIGURATION_FILE);
      const fromAttachment = attachedConfiguration
        ? parseConfigurationFile(attachedConfiguration.content)
        : {};
      // The account's configuration gives defaults; the message's configuration.txt overrides them.
      const accountDefaults = Object.fromEntries(
        Object.entries(await this.accountMeta(account)).filter(
          ([name]) => !Object.hasOwn(fromAttachment, name),
        ),
      );
      const meta: JobMeta = {
        ...accountDefaults,
        emailSubject: subject,
        emailFrom: from,
        emailReplyTo: addressing.replyTo ?? '',
        emailCc: addressing.cc ?? '',
        emailBody: (mail.text ?? '').trim().slice(0, BODY_MAX_CHARS),
      };
      await this.jobs.submit({
        // The service's own: the mailbox's settings say which senders it takes.
        caller: { kind: 'service' },
        applicationName: account.application,
        source: JobSource.EMAIL,
        meta,
        callback: null,
        parts,
        jobId,
      });
      return { addressing, rejection: null, claimedFrom: from };
    } catch (error) {
      if (isDuplicateKey(error)) {
        return { addressing, rejection: null, claimedFrom: from }; // stored by a node that saw it first
      }
      if (error instanceof ApiError) {
        return refuse(error.message);
      }
      throw error;
    }
  }
}

/** The message's own Content-Type (mailparser keeps the header as a structured value). */
function contentTypeOf(parsed: ParsedMail): string {
  const header = parsed.headers.get('content-type') as { value?: string } | string | undefined;
  const value = typeof header === 'string' ? header : (header?.value ?? 'text/plain');
  return value.toLowerCase();
}
