import { Module } from '@nestjs/common';
import { QueueModule } from '../queue/queue.module';
import { MailReplyRepository } from './mail-reply.repository';
import { MailReplyService } from './mail-reply.service';

/**
 * Mail that svc sends about jobs (docs/operations.md#jobs-by-e-mail): the `mail_reply` rows and
 * the replies owed, each queued as a job of kind `mail_reply`. Below the front ends so that
 * several use it: the mailboxes' replies (`mail/`) and a schedule's results (`schedules/`).
 * Imported by both, it is one instance on a node. The replies are sent by workers
 * (MailReplyJobExecutor, provided by WorkerModule).
 */
@Module({
  imports: [QueueModule],
  providers: [MailReplyRepository, MailReplyService],
  exports: [MailReplyRepository, MailReplyService],
})
export class MailRepliesModule {}
