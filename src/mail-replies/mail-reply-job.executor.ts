import { Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { createTransport, Transporter } from 'nodemailer';
import type { Attachment } from 'nodemailer/lib/mailer';
import { CallbackRetryPolicy } from '../callbacks/callback-retry.policy';
import { CatalogService } from '../catalog/catalog.service';
import { RestLinks } from '../common/public-uri';
import { IntakeLimitsConfig, MailConfig, NodeConfig } from '../config/config-slices';
import { explodeZip } from '../jobs/job-archive';
import { MailReplyJobsRepository } from '../queue/mail-reply-jobs.repository';
import { ClaimedJob, DeliveryJobExecutor, JobKind, MailReplyDelivery } from '../queue/queue.types';
import { ResultRepository } from '../results/result.repository';

/** Replies one node sends at once (its mail-reply slots); more due replies wait in the queue. */
export const MAIL_REPLY_SLOTS = 8;
/** No SMTP conversation waits longer than this for the server. */
const SMTP_TIMEOUT_MS = 60_000;

/** What a reply says and carries. */
interface ReplyContent {
  text: string;
  attachments: Attachment[];
}

/**
 * Runs mail-reply jobs (kind `mail_reply`) on worker nodes (docs/operations.md#jobs-by-e-mail):
 * sends the reply a mail_reply row owes through SMTP_URL: a refused message's, or a job's once
 * its result is stored: the result files attached (the result linked when it is larger than the
 * reply's attachMaxBytes), or the error text of a failed job. An attempt that fails is tried
 * again on CallbackRetryPolicy's schedule (the callbacks' settings, from the first attempt);
 * given up, ADMIN_EMAIL is told. The worker claims, leases and releases mail-reply jobs like any
 * other (WorkerService, in slots of their own, through `claim`); this records each attempt's
 * outcome with the queue, if the worker still holds the lease. Without SMTP_URL a node has no
 * mail-reply slots.
 */
@Injectable()
export class MailReplyJobExecutor implements DeliveryJobExecutor, OnModuleDestroy {
  readonly kind = JobKind.MAIL_REPLY;
  private readonly logger = new Logger('MailReply');
  private readonly transport: Transporter | null;

  constructor(
    private readonly config: MailConfig,
    private readonly node: NodeConfig,
    private readonly limits: IntakeLimitsConfig,
    private readonly replyJobs: MailReplyJobsRepository,
    private readonly results: ResultRepository,
    private readonly retryPolicy: CallbackRetryPolicy,
    private readonly catalog: CatalogService,
  ) {
    this.transport = config.smtpUrl === null ? null : this.makeTransport(config.smtpUrl);
  }

  private makeTransport(smtpUrl: string): Transporter {
    const url = new URL(smtpUrl);
    const secure = url.protocol === 'smtps:';
    return createTransport({
      host: url.hostname,
      port: url.port === '' ? (secure ? 465 : 587) : Number(url.port),
      secure,
      auth:
        url.username === ''
          ? undefined
          : { user: decodeURIComponent(url.username), pass: this.config.smtpPassword ?? '' },
      connectionTimeout: SMTP_TIMEOUT_MS,
      greetingTimeout: SMTP_TIMEOUT_MS,
      socketTimeout: SMTP_TIMEOUT_MS,
    });
  }

  onModuleDestroy(): void {
    this.transport?.close();
  }

  /** Replies one node sends at once: none without SMTP_URL. */
  get capacity(): number {
    return this.transport === null ? 0 : MAIL_REPLY_SLOTS;
  }

  /** Claims up to `limit` replies that can go into `owner`'s mail-reply slots (the worker's claim). */
  claim(owner: string, limit: number, leaseSeconds: number): Promise<ClaimedJob[]> {
    return this.replyJobs.claim(owner, limit, leaseSeconds);
  }

  /**
   * One attempt of the mail-reply job `job` leased by `owner`. An SMTP conversation is not cut
   * short by `signal`: a reply sent while the node stops is recorded if the lease is still held.
   * Returns when it is to be tried again, or null when it ended (or was not recorded).
   */
  async deliver(job: ClaimedJob, owner: string, signal: AbortSignal): Promise<Date | null> {
    const reply = job.mailReply;
    if (!reply) {
      throw new Error(`job ${job.id} is not a mail-reply job`);
    }
    const what = `reply to ${reply.replyTo} about job ${reply.jobId}`;
    try {
      const content = await this.templated(reply, await this.contentOf(reply));
      try {
        await this.transport!.sendMail({
          from: reply.from,
          to: reply.replyTo,
          cc: reply.cc ?? undefined,
          subject: reply.subject,
          inReplyTo: reply.inReplyTo ?? undefined,
          references: reply.inReplyTo ?? undefined,
          text: content.text,
          attachments: content.attachments,
        });
      } catch (error) {
        return await this.failed(job.id, owner, reply, what, (error as Error).message, signal);
      }
      await this.replyJobs.end(job.id, owner, { sent: true });
      this.logger.log(`${what}: sent`);
    } catch (error) {
      // The database failed: the lease ends and the reply is taken again.
      this.logger.warn(`${what}: not recorded: ${(error as Error).message}`);
    }
    return null;
  }

  /** A failed attempt: tried again on the retry schedule, or given up (and ADMIN_EMAIL told). */
  private async failed(
    jobId: string,
    owner: string,
    reply: MailReplyDelivery,
    what: string,
    error: string,
    signal: AbortSignal,
  ): Promise<Date | null> {
    if (signal.aborted) {
      return null; // the node stops or lost the lease: the job is handed back, not counted
    }
    const attempts = reply.attempts + 1;
    const retryAt = this.retryPolicy.nextAttemptAt(reply.firstAttemptAt, attempts, new Date());
    if (retryAt !== null) {
      await this.replyJobs.retry(jobId, owner, error, retryAt);
      this.logger.log(
        `${what}: attempt ${attempts} failed (${error}); next at ${retryAt.toISOString()}`,
      );
      return retryAt;
    }
    await this.replyJobs.end(jobId, owner, { sent: false, error });
    this.logger.warn(`${what}: failed after ${attempts} attempt(s), giving up: ${error}`);
    await this.tellAdmin(reply, attempts, error);
    return null;
  }

  /** One try to tell ADMIN_EMAIL that a reply was given up; its failure is only logged. */
  private async tellAdmin(
    reply: MailReplyDelivery,
    attempts: number,
    error: string,
  ): Promise<void> {
    const admin = this.config.adminEmail;
    if (admin === null) {
      return;
    }
    try {
      await this.transport!.sendMail({
        from: reply.from,
        to: admin,
        subject: `Undelivered reply about job ${reply.jobId}`,
        text:
          `The reply "${reply.subject}" to ${reply.replyTo} about job ${reply.jobId} of ` +
          `application ${reply.applicationName} could not be sent after ${attempts} attempt(s).\n` +
          `Last error: ${error}\n`,
      });
    } catch (notice) {
      this.logger.warn(`telling ${admin} failed too: ${(notice as Error).message}`);
    }
  }

  /**
   * The reply's text through the account's replyTemplate (EMAIL_REPLIES of its application's
   * catalog), read at each reply: {{jobId}}, {{application}}, {{subject}} and {{outcome}} (the
   * text the reply has without a template) are replaced. A missing template leaves the text.
   */
  private async templated(reply: MailReplyDelivery, content: ReplyContent): Promise<ReplyContent> {
    const account = this.config.mailAccounts.find((a) => a.name === reply.source);
    if (account === undefined || account.replyTemplate === null) {
      return content;
    }
    const template = await this.catalog.getFile(
      reply.applicationName,
      'EMAIL_REPLIES',
      account.replyTemplate,
    );
    if (template === null) {
      this.logger.warn(
        `the reply template ${account.replyTemplate} is not in the EMAIL_REPLIES of application ${reply.applicationName}; replying without it`,
      );
      return content;
    }
    const values: Record<string, string> = {
      jobId: reply.jobId,
      application: reply.applicationName,
      subject: reply.subject,
      outcome: content.text.trimEnd(),
    };
    const text = template
      .toString('utf8')
      .replace(/\{\{(\w+)\}\}/g, (whole, name: string) =>
        Object.hasOwn(values, name) ? values[name] : whole,
      );
    return { ...content, text };
  }

  /** The reply's text and attachments: the refusal, the error text, or the result files. */
  private async contentOf(reply: MailReplyDelivery): Promise<ReplyContent> {
    if (reply.rejection !== null) {
      return {
        text:
          `Your message could not be run as a job of application ${reply.applicationName}:\n\n` +
          `${reply.rejection}\n`,
        attachments: [],
      };
    }
    const result = await this.results.findDataSource(reply.applicationName, reply.jobId);
    if (result === null) {
      return {
        text: `The result of job ${reply.jobId} of application ${reply.applicationName} is no longer stored.\n`,
        attachments: [],
      };
    }
    const data = await readAll(result.open());
    if (!result.success) {
      return { text: data.toString('utf8'), attachments: [] };
    }
    const heading = `Job ${reply.jobId} of application ${reply.applicationName} is done.`;
    if (result.size > reply.attachMaxBytes) {
      const link = new RestLinks(this.node.publicBaseUrl?.replace(/\/+$/, '') ?? '').resultData(
        reply.applicationName,
        reply.jobId,
        result.type,
      );
      return {
        text: `${heading}\nIts result (${result.size} bytes) is too large to attach; fetch it from\n${link}\n`,
        attachments: [],
      };
    }
    if (result.type === 'zip') {
      const files = await explodeZip(data, {
        maxEntries: this.limits.zipMaxEntries,
        maxUncompressedBytes: this.limits.zipMaxUncompressedBytes,
        maxCompressionRatio: this.limits.zipMaxCompressionRatio,
      }).catch(() => null);
      if (files !== null) {
        return {
          text: `${heading}\nIts result files are attached.\n`,
          attachments: files.map((file) => ({ filename: file.name, content: file.content })),
        };
      }
    }
    // Files in folders (or another type): the result as it is.
    return {
      text: `${heading}\nIts result is attached.\n`,
      attachments: [
        { filename: `result.${result.type}`, content: data, contentType: result.contentType },
      ],
    };
  }
}

async function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) {
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
