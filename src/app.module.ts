import { DynamicModule, Module } from '@nestjs/common';
import { ApiModule } from './api.module';
import { ApplicationsModule } from './applications/applications.module';
import { AuditModule } from './audit/audit.module';
import { CatalogModule } from './catalog/catalog.module';
import { AppConfig } from './config/app-config';
import { ConfigModule } from './config/config.module';
import { QueueModule } from './queue/queue.module';
import { WorkerModule } from './worker/worker.module';
import { DATABASE_SCHEMA } from './database-schema';
import { DatabaseTarget } from './storage/database-options';
import { StorageModule } from './storage/storage.module';
import { MetricsModule } from './metrics/metrics.module';
import { DropDirectoryModule } from './dropdir/dropdir.module';
import { MailModule } from './mail/mail.module';
import { CommandLineModule } from './command-line/command-line.module';

/**
 * The module set of a role. Every role shares the same providers (configuration, storage,
 * queue, catalog); `api` adds the controllers, the drop directory watcher and the mailbox poller, `worker` the R engine
 * and the claim loop, `all` both.
 */
@Module({})
export class AppModule {
  static forRole(config: AppConfig, target: DatabaseTarget): DynamicModule {
    const withApi = config.role === 'all' || config.role === 'api';
    const withWorker = config.role === 'all' || config.role === 'worker';
    return {
      module: AppModule,
      imports: [
        ConfigModule.forConfig(config),
        StorageModule.forTarget(target, DATABASE_SCHEMA, `svc-${config.role}`),
        QueueModule,
        CatalogModule,
        MetricsModule,
        ApplicationsModule,
        AuditModule,
        // The drop directory and the mailboxes are front ends like REST: they run where jobs are
        // taken in; so does the command socket, which serves `svc` beside an embedded database.
        ...(withApi ? [ApiModule, DropDirectoryModule, MailModule, CommandLineModule] : []),
        ...(withWorker ? [WorkerModule] : []),
      ],
    };
  }
}
