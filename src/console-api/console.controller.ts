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
  StreamableFile,
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
import { BULK_DEFAULT_LIMIT, CancelJobsDto, RetryJobsDto } from './bulk-jobs.dto';
import type { ConsoleJob } from './console-view';
import {
  BulkCancel,
  BulkRetry,
  BulkRetryCount,
  ConsoleCaller,
  ConsoleService,
  Overview,
} from './console.service';
import { positionOf, requestedJobs } from './job-filter';
import { JobEventsService } from './job-events.service';

const LIST_DEFAULT_LIMIT = 50;
const LIST_MAX_LIMIT = 200;

/**
 * A Content-Disposition that downloads under the file's own name: its last path segment, as
 * ASCII with the rest replaced, and whole in RFC 8187's UTF-8 form.
 */
function attachmentOf(name: string): string {
  const base = name.split('/').pop() || 'file';
  const ascii = base.replace(/[^\x20-\x7e]|["\\]/g, '_');
  const encoded = encodeURIComponent(base).replace(
    /['()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}

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
    return this.console.cancel(callerOf(req), requested, body.limit ?? BULK_DEFAULT_LIMIT);
  }

  /**
   * Retries the failed jobs a filter matches (docs/api.md#the-operator-console): with
   * `dryRun`, only their count, which the console's confirmation names; else up to `limit`,
   * each within its application's maxQueuedJobs.
   */
  @Post('jobs/retry')
  @RawData()
  @HttpCode(HttpStatus.OK)
  @Header('Cache-Control', 'no-store')
  retryFailed(
    @Req() req: Request,
    @JsonBody() body: RetryJobsDto,
  ): Promise<BulkRetry | BulkRetryCount> {
    const { dryRun, limit, ...fields } = body;
    const requested = requestedJobs({ ...fields });
    return dryRun === true
      ? this.console.countFailed(callerOf(req), requested)
      : this.console.retryFailed(callerOf(req), requested, limit ?? BULK_DEFAULT_LIMIT, {
          ...fields,
        });
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

  /**
   * One input file of a job, to download: as an attachment of no declared type, so a browser
   * never renders what a client sent.
   */
  @Get('jobs/:app/:jobId/files/:fileId')
  @RawData()
  @Header('Cache-Control', 'no-store')
  @Header('X-Content-Type-Options', 'nosniff')
  async inputFile(
    @Req() req: Request,
    @Param('app', ApplicationNamePipe) app: string,
    @Param('jobId', JobIdPipe) jobId: string,
    @Param('fileId') fileId: string,
  ): Promise<StreamableFile> {
    if (!/^[1-9]\d{0,17}$/.test(fileId)) {
      throw ApiError.badRequest(
        "The file id must be the number an input file's uri ends with, as the job gives it.",
      );
    }
    const file = await this.console.inputFile(callerOf(req), app, jobId, fileId);
    return new StreamableFile(file.open(), {
      type: 'application/octet-stream',
      length: file.size,
      disposition: attachmentOf(file.name),
    });
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
