import { Module } from '@nestjs/common';
import { APP_FILTER, APP_GUARD } from '@nestjs/core';
import { ApiExceptionFilter } from './common/api-exception.filter';
import { NegotiationGuard } from './common/negotiation.guard';
import { JobsController } from './jobs/jobs.controller';
import { JobLogController } from './jobs/job-log.controller';
import { JobsModule } from './jobs/jobs.module';
import { ResultsController } from './results/results.controller';
import { ResultsModule } from './results/results.module';
import { QueueModule } from './queue/queue.module';
import { FallbackController } from './system/fallback.controller';
import { FunctionsController } from './functions/functions.controller';
import { FunctionsModule } from './functions/functions.module';
import { ProcessController } from './process/process.controller';
import { ProcessModule } from './process/process.module';
import { AccessGuard } from './security/access.guard';
import { SecurityModule } from './security/security.module';
import { UploadModule } from './upload/upload.module';
import { ConsoleModule } from './console/console.module';
import { AdminModule } from './admin/admin.module';
import { ConsoleApiModule } from './console-api/console-api.module';
import { ConsoleController } from './console-api/console.controller';
import { AdminController } from './admin/admin.controller';
import { ApiKeysController } from './admin/api-keys.controller';
import { ApplicationsController } from './admin/applications.controller';
import { AuditController } from './admin/audit.controller';
import { ApiKeysModule } from './api-keys/api-keys.module';
import { WebSessionModule } from './security/web-session.module';
import { AdminAccountsModule } from './security/admin-accounts.module';
import { MetricsController } from './metrics/metrics.controller';
import { SystemController } from './system/system.controller';
import { SystemModule } from './system/system.module';
import { SoapController } from './soap/soap.controller';
import { SoapModule } from './soap/soap.module';
import { WsdlController } from './soap/wsdl.controller';
import { EnvironmentsController } from './environments/environments.controller';
import { EnvironmentsModule } from './environments/environments.module';
import { PackagesController } from './packages/packages.controller';
import { PackagesModule } from './packages/packages.module';
import { UsageModule } from './usage/usage.module';
import { UsageStatisticsController } from './usage/usage-statistics.controller';
import { OpenApiController } from './openapi/openapi.controller';
import { OpenApiModule } from './openapi/openapi.module';
import { SchedulesController } from './schedules/schedules.controller';
import { SchedulesModule } from './schedules/schedules.module';
import { FlowsController } from './flows/flows.controller';
import { FlowsModule } from './flows/flows.module';

/** What an API node adds: the HTTP controllers and the cross-cutting guards and filter. */
@Module({
  imports: [
    JobsModule,
    ResultsModule,
    QueueModule,
    AdminModule,
    ConsoleApiModule,
    ApiKeysModule,
    WebSessionModule,
    AdminAccountsModule,
    SystemModule,
    UploadModule,
    ConsoleModule,
    SecurityModule,
    ProcessModule,
    FunctionsModule,
    SoapModule,
    UsageModule,
    PackagesModule,
    EnvironmentsModule,
    OpenApiModule,
    SchedulesModule,
    FlowsModule,
  ],
  // FallbackController last: Express tries routes in this order and its catch-all takes the rest.
  controllers: [
    // Before JobsController: its 405 answer for the log's path comes after the log's routes.
    JobLogController,
    JobsController,
    ResultsController,
    ProcessController,
    FunctionsController,
    UsageStatisticsController,
    AdminController,
    ApiKeysController,
    ApplicationsController,
    AuditController,
    ConsoleController,
    PackagesController,
    EnvironmentsController,
    SchedulesController,
    FlowsController,
    SystemController,
    MetricsController,
    SoapController,
    WsdlController,
    OpenApiController,
    FallbackController,
  ],
  providers: [
    // Global guards run in the order they are registered: access control first.
    { provide: APP_GUARD, useExisting: AccessGuard },
    { provide: APP_GUARD, useClass: NegotiationGuard },
    // RepresentationInterceptor is not global: controllers that return representations carry
    // @RendersRepresentations() (representation.interceptor.ts).
    { provide: APP_FILTER, useClass: ApiExceptionFilter },
  ],
})
export class ApiModule {}
