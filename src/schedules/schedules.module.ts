import { Module } from '@nestjs/common';
import { CatalogModule } from '../catalog/catalog.module';
import { JobsModule } from '../jobs/jobs.module';
import { MailRepliesModule } from '../mail-replies/mail-replies.module';
import { ScheduleRepository } from './schedule.repository';
import { ScheduleTicker } from './schedule-ticker.service';
import { SchedulesService } from './schedules.service';

/**
 * Scheduled jobs (docs/api.md#schedules): the admin API's service and the ticker that fires them
 * through the intake. A front end like REST and the drop directory, so it runs on the nodes that
 * take jobs in (roles api and all); SchedulesController is declared in ApiModule.
 */
@Module({
  imports: [JobsModule, CatalogModule, MailRepliesModule],
  providers: [ScheduleRepository, SchedulesService, ScheduleTicker],
  exports: [SchedulesService],
})
export class SchedulesModule {}
