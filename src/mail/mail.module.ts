import { Module } from '@nestjs/common';
import { CatalogModule } from '../catalog/catalog.module';
import { JobsModule } from '../jobs/jobs.module';
import { MailRepliesModule } from '../mail-replies/mail-replies.module';
import { MailIntakeService } from './mail-intake.service';

/**
 * Jobs by e-mail (docs/operations.md#jobs-by-e-mail): the mailboxes of EMAIL_ACCOUNTS polled for
 * jobs; their replies are recorded and sent by `mail-replies/` (MailReplyService, which other
 * modules use to send a job's result by e-mail). An intake front end like REST and the drop
 * directory, so it runs on the nodes that take jobs in (roles api and all).
 */
@Module({
  imports: [JobsModule, MailRepliesModule, CatalogModule],
  providers: [MailIntakeService],
})
export class MailModule {}
