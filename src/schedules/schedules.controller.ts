import {
  All,
  Controller,
  Delete,
  Get,
  HttpCode,
  Param,
  Post,
  Put,
  Req,
  Res,
  UseGuards,
} from '@nestjs/common';
import type { Request, Response } from 'express';
import { ApiError } from '../common/api-error';
import { ApplicationNameGuard, applicationNameOf } from '../common/application-name';
import { readLimitedBody } from '../common/limited-body';
import { mediaTypeOf } from '../common/media-type';
import { methodNotAllowed } from '../common/method-not-allowed';
import { RawData } from '../common/negotiation.guard';
import { publicBaseUrl } from '../common/public-uri';
import { AppConfig } from '../config/app-config';
import { Access } from '../security/access.decorator';
import { SchedulesService, ScheduleView } from './schedules.service';

/** The largest schedule definition accepted (a function call's payload included). */
export const MAX_SCHEDULE_BYTES = 1_048_576;

/** The JSON body of a POST or PUT: application/json, at most MAX_SCHEDULE_BYTES, parsed. */
async function jsonBody(req: Request): Promise<unknown> {
  if (mediaTypeOf(req) !== 'application/json') {
    throw ApiError.unsupportedMediaType('A schedule is sent as application/json.');
  }
  const body = await readLimitedBody(
    req,
    MAX_SCHEDULE_BYTES,
    `A schedule may have at most ${MAX_SCHEDULE_BYTES} bytes.`,
  );
  try {
    return JSON.parse(body.toString('utf8')) as unknown;
  } catch (error) {
    throw ApiError.badRequest(`The body is not JSON: ${(error as Error).message}.`);
  }
}

/** A JSON answer; never cached (its next and last runs change by the second). */
function send(res: Response, status: number, value: unknown): void {
  res
    .status(status)
    .setHeader('Cache-Control', 'no-store')
    .type('application/json; charset=utf-8')
    .send(JSON.stringify(value));
}

/**
 * Scheduled jobs (admin API, docs/api.md#schedules): the application in X-SVC-Application-Name,
 * as for the catalog; its admins and the global admins only. JSON in and out.
 */
@Controller('svc/api/rest/admin/schedules')
export class SchedulesController {
  constructor(
    private readonly config: AppConfig,
    private readonly schedules: SchedulesService,
  ) {}

  private base(req: Request): string {
    return publicBaseUrl(req, this.config.publicBaseUrl);
  }

  @Get()
  @Access('applicationAdmin')
  @RawData()
  @UseGuards(ApplicationNameGuard)
  async list(@Req() req: Request, @Res() res: Response): Promise<void> {
    send(res, 200, {
      schedules: await this.schedules.list(applicationNameOf(req), this.base(req)),
    });
  }

  /** 201 with the schedule and its Location. */
  @Post()
  @Access('applicationAdmin')
  @RawData()
  @UseGuards(ApplicationNameGuard)
  async create(@Req() req: Request, @Res() res: Response): Promise<void> {
    const schedule = await this.schedules.create(
      applicationNameOf(req),
      await jsonBody(req),
      this.base(req),
    );
    res.setHeader('Location', schedule.selfUri);
    send(res, 201, schedule);
  }

  @All()
  @Access('public')
  otherOnSchedules(@Req() req: Request): never {
    throw methodNotAllowed(req, ['GET', 'HEAD', 'POST']);
  }

  @Get(':id')
  @Access('applicationAdmin')
  @RawData()
  @UseGuards(ApplicationNameGuard)
  async get(@Req() req: Request, @Res() res: Response, @Param('id') id: string): Promise<void> {
    send(res, 200, await this.schedules.get(applicationNameOf(req), id, this.base(req)));
  }

  @Put(':id')
  @Access('applicationAdmin')
  @RawData()
  @UseGuards(ApplicationNameGuard)
  async replace(@Req() req: Request, @Res() res: Response, @Param('id') id: string): Promise<void> {
    const body = await jsonBody(req);
    send(res, 200, await this.schedules.replace(applicationNameOf(req), id, body, this.base(req)));
  }

  @Delete(':id')
  @Access('applicationAdmin')
  @UseGuards(ApplicationNameGuard)
  @HttpCode(204)
  async remove(@Req() req: Request, @Param('id') id: string): Promise<void> {
    await this.schedules.remove(applicationNameOf(req), id);
  }

  @All(':id')
  @Access('public')
  otherOnSchedule(@Req() req: Request): never {
    throw methodNotAllowed(req, ['GET', 'HEAD', 'PUT', 'DELETE']);
  }

  @Post(':id/pause')
  @Access('applicationAdmin')
  @RawData()
  @UseGuards(ApplicationNameGuard)
  async pause(@Req() req: Request, @Res() res: Response, @Param('id') id: string): Promise<void> {
    send(res, 200, await this.setPaused(req, id, true));
  }

  @Post(':id/resume')
  @Access('applicationAdmin')
  @RawData()
  @UseGuards(ApplicationNameGuard)
  async resume(@Req() req: Request, @Res() res: Response, @Param('id') id: string): Promise<void> {
    send(res, 200, await this.setPaused(req, id, false));
  }

  @All([':id/pause', ':id/resume'])
  @Access('public')
  otherOnPauseResume(@Req() req: Request): never {
    throw methodNotAllowed(req, ['POST']);
  }

  private setPaused(req: Request, id: string, paused: boolean): Promise<ScheduleView> {
    return this.schedules.setPaused(applicationNameOf(req), id, paused, this.base(req));
  }
}
