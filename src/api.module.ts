import { Module } from '@nestjs/common';
import { APP_FILTER, APP_GUARD, APP_INTERCEPTOR } from '@nestjs/core';
import { ApiExceptionFilter } from './common/api-exception.filter';
import { NegotiationGuard } from './common/negotiation.guard';
import { RepresentationInterceptor } from './common/representation.interceptor';
import { JobsController } from './jobs/jobs.controller';
import { JobsModule } from './jobs/jobs.module';
import { ResultsController } from './results/results.controller';
import { ResultsModule } from './results/results.module';
import { FallbackController } from './common/fallback.controller';
import { ProcessController } from './process/process.controller';
import { ProcessModule } from './process/process.module';

/** What an API node adds: the HTTP controllers and the cross-cutting guard, interceptor and filter. */
@Module({
  imports: [JobsModule, ResultsModule, ProcessModule],
  controllers: [JobsController, ResultsController, ProcessController, FallbackController],
  providers: [
    { provide: APP_GUARD, useClass: NegotiationGuard },
    { provide: APP_INTERCEPTOR, useClass: RepresentationInterceptor },
    { provide: APP_FILTER, useClass: ApiExceptionFilter },
  ],
})
export class ApiModule {}
