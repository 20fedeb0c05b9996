import { MIGRATIONS } from '../migrations';
import { ApiKeyEntity } from './api-keys/api-key.entity';
import { ApplicationSettingsEntity } from './applications/application-settings.entity';
import { AuditEventEntity } from './audit/audit-event.entity';
import { JobCallbackEntity } from './callbacks/job-callback.entity';
import { CatalogFileEntity } from './catalog/catalog-file.entity';
import {
  ApplicationEnvironmentEntity,
  REnvironmentEntity,
} from './environments/r-environment.entity';
import { DropFileEntity } from './dropdir/drop-file.entity';
import { JobLogLineEntity } from './job-log/job-log-line.entity';
import { MailReplyEntity } from './mail-replies/mail-reply.entity';
import { SubmissionBucketEntity } from './jobs/submission-bucket.entity';
import { RPackageNodeEntity } from './packages/r-package-node.entity';
import { RPackageEntity } from './packages/r-package.entity';
import { JobFileChunkEntity } from './queue/job-file-chunk.entity';
import { JobFileEntity } from './queue/job-file.entity';
import { JobEntity } from './queue/job.entity';
import { JobNeedEntity } from './queue/job-need.entity';
import { JobWaitEntity } from './queue/job-wait.entity';
import { FlowEntity, FlowStepEntity } from './flows/flow.entity';
import { WorkerNodeEntity } from './queue/worker-node.entity';
import { ResultChunkEntity } from './results/result-chunk.entity';
import { ResultEntity } from './results/result.entity';
import { JobUsageEntity } from './usage/job-usage.entity';
import { ScheduleEntity, ScheduleRunEntity } from './schedules/schedule.entity';
import { WebSessionEntity } from './security/web-session.entity';
import { AdminAccountEntity } from './security/admin-account.entity';
import type { DatabaseSchema } from './storage/database-options';

/**
 * Every feature's tables and the migrations that make them: the one place that knows them all,
 * above the features, so that storage knows none of them.
 */
export const DATABASE_SCHEMA: DatabaseSchema = {
  entities: [
    JobEntity,
    JobFileEntity,
    JobFileChunkEntity,
    JobLogLineEntity,
    ResultEntity,
    ResultChunkEntity,
    CatalogFileEntity,
    JobUsageEntity,
    DropFileEntity,
    MailReplyEntity,
    JobCallbackEntity,
    RPackageEntity,
    RPackageNodeEntity,
    ScheduleEntity,
    ScheduleRunEntity,
    SubmissionBucketEntity,
    ApiKeyEntity,
    ApplicationSettingsEntity,
    AuditEventEntity,
    WebSessionEntity,
    AdminAccountEntity,
    WorkerNodeEntity,
    REnvironmentEntity,
    ApplicationEnvironmentEntity,
    JobNeedEntity,
    JobWaitEntity,
    FlowEntity,
    FlowStepEntity,
  ],
  migrations: MIGRATIONS,
};
