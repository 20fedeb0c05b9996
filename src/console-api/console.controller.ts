import {
  Controller,
  Get,
  Header,
  HttpCode,
  HttpStatus,
  Param,
  Post,
  Query,
  Req,
} from '@nestjs/common';
import type { Request } from 'express';
import { ApiError } from '../common/api-error';
import type { EventStream } from '../common/event-stream';
import { ApplicationNamePipe, JobIdPipe } from '../common/application-name';
import { EventStreamRoute } from '../common/event-stream-route';
import { JsonBody } from '../common/json-body';
import { RawData } from '../common/negotiation.guard';
import { publicBaseUrl, REST_PREFIX } from '../common/public-uri';
import { wholeNumber } from '../common/query-parameters';
import { NodeConfig } from '../config/config-slices';
import { Access } from '../security/access.decorator';
import { EventStreamQuota } from '../security/event-stream-quota';
import { Principal, principalOf } from '../security/principal';
import { CANCEL_DEFAULT_LIMIT, CancelJobsDto } from './cancel-jobs.dto';
import type { ConsoleJob } from './console-view';
import { BulkCancel, ConsoleCaller, ConsoleService, Overview } from './console.service';
import { positionOf, requestedJobs } from './job-filter';
import { JobEventsService } from './job-events.service';

const LIST_DEFAULT_LIMIT = 50;
const LIST_MAX_LIMIT = 200;

/** The caller the access guard let through (anyAdmin: always someone). */
function callerOf(req: Request): Principal {
  const principal = principalOf(req);
  if (!principal) {
    throw new ApiError(HttpStatus.UNAUTHORIZED, 'Authentication is required.');
  }
  return principal;
}

/**
 * The operator console's API (docs/api.md#the-operator-console): global admins and application
 * admins, each narrowed to the applications they administer by ConsoleService; JSON.
 */
@Controller('svc/api/rest/admin')
@Access('anyAdmin')
export class ConsoleController {
  constructor(
    private readonly console: ConsoleService,
    private readonly events: JobEventsService,
    private readonly node: NodeConfig,
    private readonly streams: EventStreamQuota,
  ) {}

  @Get('me')
  @RawData()
  @Header('Cache-Control', 'no-store')
  me(@Req() req: Request): Promise<ConsoleCaller> {
    return this.console.caller(callerOf(req));
  }

  @Get('jobs')
  @RawData()
  @Header('Cache-Control', 'no-store')
  async list(
    @Req() req: Request,
    @Query() query: Record<string, unknown>,
  ): Promise<{ jobs: ConsoleJob[]; next: string | null; nextUri: string | null }> {
    const requested = requestedJobs(query);
    const limit = wholeNumber(query.limit, 'limit', LIST_DEFAULT_LIMIT, 1, LIST_MAX_LIMIT);
    const base = this.base(req);
    const page = await this.console.list(
      callerOf(req),
      requested,
      limit,
      positionOf(query.cursor),
      base,
    );
    let nextUri: string | null = null;
    if (page.next !== null) {
      const next = new URLSearchParams(
        Object.entries(query).filter(
          (entry): entry is [string, string] => typeof entry[1] === 'string',
        ),
      );
      next.set('cursor', page.next);
      nextUri = `${base}${REST_PREFIX}/admin/jobs?${next.toString()}`;
    }
    return { ...page, nextUri };
  }

  @Post('jobs/cancel')
  @RawData()
  @HttpCode(HttpStatus.OK)
  @Header('Cache-Control', 'no-store')
  cancel(@Req() req: Request, @JsonBody() body: CancelJobsDto): Promise<BulkCancel> {
    const requested = requestedJobs({ ...body }, ['QUEUED', 'RUNNING']);
    return this.console.cancel(callerOf(req), requested, body.limit ?? CANCEL_DEFAULT_LIMIT);
  }

  @Get('jobs/:app/:jobId')
  @RawData()
  @Header('Cache-Control', 'no-store')
  job(
    @Req() req: Request,
    @Param('app', ApplicationNamePipe) app: string,
    @Param('jobId', JobIdPipe) jobId: string,
  ): Promise<ConsoleJob> {
    return this.console.job(callerOf(req), app, jobId, this.base(req));
  }

  @Post('jobs/:app/:jobId/retry')
  @RawData()
  @HttpCode(HttpStatus.ACCEPTED)
  @Header('Cache-Control', 'no-store')
  retry(
    @Req() req: Request,
    @Param('app', ApplicationNamePipe) app: string,
    @Param('jobId', JobIdPipe) jobId: string,
  ): Promise<ConsoleJob> {
    return this.console.retry(callerOf(req), app, jobId, this.base(req));
  }

  @Post('jobs/:app/:jobId/cancel')
  @RawData()
  @HttpCode(HttpStatus.OK)
  @Header('Cache-Control', 'no-store')
  cancelOne(
    @Req() req: Request,
    @Param('app', ApplicationNamePipe) app: string,
    @Param('jobId', JobIdPipe) jobId: string,
  ): Promise<ConsoleJob> {
    return this.console.cancelOne(callerOf(req), app, jobId, this.base(req));
  }

  @Get('overview')
  @RawData()
  @Header('Cache-Control', 'no-store')
  overview(@Req() req: Request): Promise<Overview> {
    return this.console.overview(callerOf(req));
  }

  /**
   * The events of the applications the caller administers now; should they lose one (or their
   * right to the console), the stream ends with a `revoked` event.
   */
  @Get('events')
  @EventStreamRoute()
  @RawData()
  follow(@Req() req: Request): EventStream {
    const visible = this.console.visibleApplications(callerOf(req));
    return this.streams.hold(req, this.events.follow(visible), (now) =>
      now === null ? 'its caller is gone' : this.console.lostApplications(now, visible),
    );
  }

  /** Without Accept: text/event-stream the events path says what it wants. */
  @Get('events')
  @RawData()
  eventsWithoutStream(): never {
    throw ApiError.notAcceptable(
      'The console\'s events are Server-Sent Events: send "Accept: text/event-stream".',
    );
  }

  private base(req: Request): string {
    return publicBaseUrl(req, this.node.publicBaseUrl);
  }
}
