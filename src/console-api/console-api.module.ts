import { Module } from '@nestjs/common';
import { AdminModule } from '../admin/admin.module';
import { JobsModule } from '../jobs/jobs.module';
import { QueueModule } from '../queue/queue.module';
import { ConsoleService } from './console.service';
import { JobEventsService } from './job-events.service';

/**
 * The operator console's API: jobs across applications, retries, bulk cancels, the overview
 * and the event stream. Its ConsoleController is declared in ApiModule, which orders the routes.
 */
@Module({
  imports: [QueueModule, JobsModule, AdminModule],
  providers: [ConsoleService, JobEventsService],
  exports: [ConsoleService, JobEventsService],
})
export class ConsoleApiModule {}
