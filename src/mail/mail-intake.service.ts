import { randomUUID } from 'node:crypto';
import {
  BeforeApplicationShutdown,
  Injectable,
  Logger,
  OnApplicationBootstrap,
} from '@nestjs/common';
import { AddressObject, ParsedMail, simpleParser } from 'mailparser';
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
import { MailboxSession, openMailbox, WaitingMessage } from './mailbox';

/** Marks jobs that came by e-mail (the job's `source`). */
export const EMAIL_SOURCE = 'email';

/** The body text kept as emailBody: configuration.txt is no place for a whole newsletter. */
const BODY_MAX_CHARS = 64 * 1024;
/** Settled records are kept this long: a message still in its mailbox then would run again. */
const RECORD_RETENTION_DAYS = 30;
const CLEANUP_EVERY_MS = 3_600_000;

function addresses(field: AddressObject | AddressObject[] | undefined): string[] {
  const objects = field === undefined ? [] : Array.isArray(field) ? field : [field];
  return objects.flatMap((o) => o.value.map((v) => v.address ?? '')).filter((a) => a !== '');
}

/** The job a message asks for, or why it is not one, with where the reply goes. */
interface MessageOutcome {
  addressing: ReplyAddressing;
  rejection: string | null;
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
        await this.take(account, session, message);
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

  /** Turns one message into its job (or its refusal) once, then removes it from the mailbox. */
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
    if (record.state === MailReplyState.RECEIVED) {
      // A message over the limit is never read whole: its header says where the refusal goes.
      const tooLarge = message.size > this.limits.maxRequestBytes;
      const outcome = await this.submit(
        account,
        message,
        await (tooLarge ? session.readHeader(message.key) : session.read(message.key)),
        record.jobId,
      );
      await this.records.settle(account.name, message.key, outcome.addressing, outcome.rejection);
      this.logger.log(
        outcome.rejection === null
          ? `mailbox ${account.name}: message ${message.key} is job ${record.jobId}`
          : `mailbox ${account.name}: message ${message.key} refused: ${outcome.rejection}`,
      );
      this.replies.wake();
    }
    // Only now: the job (or the refusal and its reply) is stored.
    await session.remove(message.key);
  }

  private async submit(
    account: EmailAccount,
    message: WaitingMessage,
    raw: Buffer,
    jobId: string,
  ): Promise<MessageOutcome> {
    const parsed = await simpleParser(raw, { skipTextToHtml: true, skipImageLinks: true });
    const replyTo = addresses(parsed.replyTo)[0] ?? addresses(parsed.from)[0] ?? null;
    const subject = parsed.subject ?? '';
    const addressing: ReplyAddressing = {
      replyTo,
      cc: addresses(parsed.cc).join(', ') || null,
      subject: `RE: ${subject}`,
      from: account.replyFrom,
      inReplyTo: parsed.messageId ?? null,
      attachMaxBytes: account.attachMaxBytes,
    };
    const refuse = (rejection: string): MessageOutcome => ({ addressing, rejection });
    if (replyTo === null) {
      return refuse('The message has neither a Reply-To nor a From address.');
    }
    const from = addresses(parsed.from)[0] ?? replyTo;
    if (!senderAllowed(account, from)) {
      return refuse(`${from} may not send jobs of application ${account.application}.`);
    }
    const size = Math.max(message.size, raw.length);
    if (size > this.limits.maxRequestBytes) {
      return refuse(
        `The message has ${size} bytes, more than the limit of ${this.limits.maxRequestBytes} (MAX_REQUEST_BYTES).`,
      );
    }
    if (!contentTypeOf(parsed).startsWith('multipart/')) {
      return refuse(
        'The message is not multipart: attach the R script (.R), a ZIP archive, or the data files with a configuration.txt.',
      );
    }
    const files = parsed.attachments.filter((a) => a.filename !== undefined && a.filename !== '');
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
        emailReplyTo: replyTo,
        emailCc: addressing.cc ?? '',
        emailBody: (parsed.text ?? '').trim().slice(0, BODY_MAX_CHARS),
      };
      await this.jobs.submit({
        applicationName: account.application,
        source: EMAIL_SOURCE,
        meta,
        callback: null,
        parts,
        jobId,
      });
      return { addressing, rejection: null };
    } catch (error) {
      if (isDuplicateKey(error)) {
        return { addressing, rejection: null }; // stored by a node that saw it first
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
