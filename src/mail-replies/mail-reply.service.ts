import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { MailConfig } from '../config/config-slices';
import { QueueNotifier } from '../queue/queue-notifier.service';
import { JobKind } from '../queue/queue.types';
import { MailReplyRepository } from './mail-reply.repository';

/** How to address a job's result sent by e-mail at another module's request. */
export interface ResultMailRequest {
  to: string;
  cc?: string | null;
  subject: string;
  from: string;
  /** Results larger than this are linked, not attached; default EMAIL_ATTACH_MAX_BYTES. */
  attachMaxBytes?: number;
}

/**
 * The replies other modules owe by e-mail: `sendResult` owes a job's result to an address, and
 * `wake` tells this node's workers that a reply was queued. The replies are sent by workers, as
 * jobs of kind `mail_reply` (MailReplyJobExecutor, docs/queue.md#mail-reply-jobs).
 */
@Injectable()
export class MailReplyService {
  constructor(
    private readonly config: MailConfig,
    private readonly replies: MailReplyRepository,
    private readonly notifier: QueueNotifier,
  ) {}

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

  /**
   * A reply was queued by this node (its statement notified the other nodes at commit): this
   * node's workers look for replies that can go now.
   */
  wake(): void {
    this.notifier.jobQueued(JobKind.MAIL_REPLY);
  }
}
