import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { createTransport, Transporter } from 'nodemailer';
import type { Attachment } from 'nodemailer/lib/mailer';
import type { EntityManager } from 'typeorm';
import { CallbackRetryPolicy } from '../callbacks/callback-retry.policy';
import { CatalogService } from '../catalog/catalog.service';
import { RestLinks } from '../common/public-uri';
import { IntakeLimitsConfig, MailConfig, NodeConfig, QueueConfig } from '../config/config-slices';
import { explodeZip } from '../jobs/job-archive';
import { ResultRepository } from '../results/result.repository';
import { DueReply, MailReplyRepository } from './mail-reply.repository';
import { outsideRequests } from '../common/outside-requests';

/** Replies one node sends at once; more wait for the next round. */
const MAX_IN_FLIGHT = 8;
/** How long an attempt's claim lasts before another node may take the reply. */
const LEASE_SECONDS = 120;
/** No SMTP conversation waits longer than this for the server. */
const SMTP_TIMEOUT_MS = 60_000;

/** How to address a job's result sent by e-mail at another module's request. */
export interface ResultMailRequest {
  to: string;
  cc?: string | null;
  subject: string;
  from: string;
  /** Results larger than this are linked, not attached; default EMAIL_ATTACH_MAX_BYTES. */
  attachMaxBytes?: number;
}

/** What a reply says and carries. */
interface ReplyContent {
  text: string;
  attachments: Attachment[];
}

/**
 * Sends the replies mail_reply owes (docs/operations.md#jobs-by-e-mail): a refused message's at
 * once, a job's once its result is stored: the result files attached (the result linked when it
 * is larger than the account's attachMaxBytes), or the error text of a failed job. An attempt
 * that fails is retried on CallbackRetryPolicy's schedule (the callbacks' settings); given up,
 * ADMIN_EMAIL is told. Other modules send a job's result with `sendResult`.
 */
@Injectable()
export class MailReplyService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('MailReply');
  private readonly transport: Transporter | null;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private claiming = false;
  private claimAgain = false;
  private stopping = false;

  constructor(
    private readonly config: MailConfig,
    private readonly node: NodeConfig,
    private readonly queueConfig: QueueConfig,
    private readonly limits: IntakeLimitsConfig,
    private readonly replies: MailReplyRepository,
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

  /**
   * Sends job `jobId`'s result to `request.to` once it is stored (at once if it is), with the
   * same retries as a reply; a second request for the same job is ignored. Given `transaction`
   * (the one that stores the job), the e-mail is owed only if it commits, and the caller calls
   * `wake` after the commit (until then no node can see it; the poll finds it otherwise).
   */
  async sendResult(
    jobId: string,
    applicationName: string,
    request: ResultMailRequest,
    transaction?: EntityManager,
  ): Promise<void> {
    await this.replies.owe(
      jobId,
      applicationName,
      {
        replyTo: request.to,
        cc: request.cc ?? null,
        subject: request.subject,
        from: request.from,
        inReplyTo: null,
        attachMaxBytes: request.attachMaxBytes ?? this.config.emailAttachMaxBytes,
      },
      transaction,
    );
    if (transaction === undefined) {
      this.wake();
    }
  }

  onApplicationBootstrap(): void {
    if (this.transport === null) {
      return;
    }
    // Results are stored on worker nodes: polling finds the replies they make due.
    const poll = setInterval(() => this.wake(), this.queueConfig.pollIntervalMs);
    poll.unref();
    this.timers.add(poll);
    this.wake();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopping = true;
    this.timers.forEach((timer) => clearTimeout(timer));
    await Promise.all(this.inFlight);
    this.transport?.close();
  }

  /** Asks for a round of claims now; rounds never overlap. */
  wake(): void {
    if (this.stopping || this.transport === null) {
      return;
    }
    if (this.claiming) {
      this.claimAgain = true;
      return;
    }
    outsideRequests(() => void this.claimRounds());
  }

  private async claimRounds(): Promise<void> {
    this.claiming = true;
    try {
      do {
        this.claimAgain = false;
        const free = MAX_IN_FLIGHT - this.inFlight.size;
        if (free <= 0 || this.stopping) {
          break;
        }
        const due = await this.replies.claimDue(free, LEASE_SECONDS);
        for (const reply of due) {
          const attempt = this.attempt(reply).finally(() => {
            this.inFlight.delete(attempt);
            this.wake();
          });
          this.inFlight.add(attempt);
        }
        this.claimAgain ||= due.length === free;
      } while (this.claimAgain && !this.stopping);
    } catch (error) {
      this.logger.warn(`claiming replies failed: ${(error as Error).message}`);
    } finally {
      this.claiming = false;
    }
  }

  private async attempt(reply: DueReply): Promise<void> {
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
        await this.failed(reply, what, (error as Error).message);
        return;
      }
      await this.replies.markSent(reply);
      this.logger.log(`${what}: sent`);
    } catch (error) {
      // The database failed: the claim's lease ends and the reply is taken again.
      this.logger.warn(`${what}: not recorded: ${(error as Error).message}`);
    }
  }

  private async failed(reply: DueReply, what: string, error: string): Promise<void> {
    const attempts = reply.attempts + 1;
    const retryAt = this.stopping
      ? new Date()
      : this.retryPolicy.nextAttemptAt(reply.firstAttemptAt, attempts, new Date());
    await this.replies.recordFailure(reply, error, retryAt);
    if (retryAt !== null) {
      this.logger.log(
        `${what}: attempt ${attempts} failed (${error}); next at ${retryAt.toISOString()}`,
      );
      this.wakeAt(retryAt);
      return;
    }
    this.logger.warn(`${what}: failed after ${attempts} attempt(s), giving up: ${error}`);
    await this.tellAdmin(reply, attempts, error);
  }

  /** One try to tell ADMIN_EMAIL that a reply was given up; its failure is only logged. */
  private async tellAdmin(reply: DueReply, attempts: number, error: string): Promise<void> {
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
  private async templated(reply: DueReply, content: ReplyContent): Promise<ReplyContent> {
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
  private async contentOf(reply: DueReply): Promise<ReplyContent> {
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

  private wakeAt(at: Date): void {
    const timer = setTimeout(
      () => {
        this.timers.delete(timer);
        this.wake();
      },
      Math.max(0, at.getTime() - Date.now()) + 5,
    );
    timer.unref();
    this.timers.add(timer);
  }
}

async function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) {
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
