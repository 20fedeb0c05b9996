import { Module } from '@nestjs/common';
import { CallbacksModule } from '../callbacks/callbacks.module';
import { CatalogModule } from '../catalog/catalog.module';
import { ResultsModule } from '../results/results.module';
import { MailReplyRepository } from './mail-reply.repository';
import { MailReplyService } from './mail-reply.service';

/**
 * Mail that svc sends about jobs (docs/operations.md#jobs-by-e-mail): the `mail_reply` rows and
 * their sending through SMTP_URL with retries. Below the front ends so that several use it: the
 * mailboxes' replies (`mail/`) and a schedule's results (`schedules/`). Imported by both, it is
 * one instance on a node.
 */
@Module({
  imports: [ResultsModule, CallbacksModule, CatalogModule],
  providers: [MailReplyRepository, MailReplyService],
  exports: [MailReplyRepository, MailReplyService],
})
export class MailRepliesModule {}
