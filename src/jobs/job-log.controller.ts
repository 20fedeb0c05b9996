import { Controller, Get, Header, Headers, Param, Req, StreamableFile } from '@nestjs/common';
import type { Request } from 'express';
import { ApplicationNamePipe, JobIdPipe } from '../common/application-name';
import type { EventStream } from '../common/event-stream';
import { EventStreamRoute } from '../common/event-stream-route';
import { RawData } from '../common/negotiation.guard';
import { Access } from '../security/access.decorator';
import { EventStreamQuota } from '../security/event-stream-quota';
import { JobLogService } from './job-log.service';

/**
 * A job's log: R's output, followed live as Server-Sent Events with `Accept: text/event-stream`,
 * else the text stored now. Without RepresentationInterceptor, which would run the live handler
 * only after the event stream's headers are out, too late for its 400 and 404. Ahead of
 * JobsController in ApiModule, so that its routes come first.
 */
@Controller('svc/api/rest/jobs')
export class JobLogController {
  constructor(
    private readonly jobLogs: JobLogService,
    private readonly streams: EventStreamQuota,
  ) {}

  @Get(':app/:jobId/log')
  @EventStreamRoute()
  @Access('readResults')
  @RawData()
  async live(
    @Req() req: Request,
    @Param('app', ApplicationNamePipe) applicationName: string,
    @Param('jobId', JobIdPipe) jobId: string,
    @Headers('last-event-id') lastEventId?: string,
  ): Promise<EventStream> {
    // The 400 and 404 first: a refused stream is counted only for a job that is there.
    const stream = await this.jobLogs.follow(applicationName, jobId, lastEventId);
    return this.streams.hold(req, stream);
  }

  @Get(':app/:jobId/log')
  @Access('readResults')
  @RawData()
  @Header('Cache-Control', 'no-store')
  log(
    @Param('app', ApplicationNamePipe) applicationName: string,
    @Param('jobId', JobIdPipe) jobId: string,
  ): Promise<StreamableFile> {
    return this.jobLogs.plain(applicationName, jobId);
  }
}
