import { Module } from '@nestjs/common';
import { CallbacksModule } from '../callbacks/callbacks.module';
import { CatalogModule } from '../catalog/catalog.module';
import { JobsModule } from '../jobs/jobs.module';
import { ResultsModule } from '../results/results.module';
import { MailIntakeService } from './mail-intake.service';
import { MailReplyRepository } from './mail-reply.repository';
import { MailReplyService } from './mail-reply.service';

/**
 * Jobs by e-mail (docs/operations.md#jobs-by-e-mail): the mailboxes of EMAIL_ACCOUNTS polled for
 * jobs and the replies sent through SMTP_URL. An intake front end like REST and the drop
 * directory, so it runs on the nodes that take jobs in (roles api and all). MailReplyService is
 * exported for other modules that send a job's result by e-mail.
 */
@Module({
  imports: [JobsModule, ResultsModule, CallbacksModule, CatalogModule],
  providers: [MailReplyRepository, MailReplyService, MailIntakeService],
  exports: [MailReplyService],
})
export class MailModule {}
