import {
  Controller,
  Delete,
  Get,
  Header,
  HttpCode,
  Param,
  Post,
  Put,
  Req,
  UseGuards,
} from '@nestjs/common';
import type { Request } from 'express';
import { ApplicationNameGuard, applicationNameOf } from '../common/application-name';
import { HttpAnswer } from '../common/http-answer';
import { JsonBody, JsonBodyRule } from '../common/json-body';
import { RawData } from '../common/negotiation.guard';
import { publicBaseUrl } from '../common/public-uri';
import { NodeConfig } from '../config/config-slices';
import { Access } from '../security/access.decorator';
import { ScheduleDto } from './schedule.dto';
import { SchedulesService, ScheduleView } from './schedules.service';

/** The largest schedule definition accepted (a function call's payload included). */
export const MAX_SCHEDULE_BYTES = 1_048_576;

/** The JSON body of a POST or PUT. */
const SCHEDULE_BODY: JsonBodyRule = {
  maxBytes: MAX_SCHEDULE_BYTES,
  wrongType: 'A schedule is sent as application/json.',
  tooLarge: `A schedule may have at most ${MAX_SCHEDULE_BYTES} bytes.`,
};

/**
 * Scheduled jobs (admin API, docs/api.md#schedules): the application in X-SVC-Application-Name,
 * as for the catalog; its admins and the global admins only. JSON in and out, never cached (a
 * schedule's next and last runs change by the second).
 */
@Controller('svc/api/rest/admin/schedules')
export class SchedulesController {
  constructor(
    private readonly config: NodeConfig,
    private readonly schedules: SchedulesService,
  ) {}

  private base(req: Request): string {
    return publicBaseUrl(req, this.config.publicBaseUrl);
  }

  @Get()
  @Access('applicationAdmin')
  @RawData()
  @UseGuards(ApplicationNameGuard)
  @Header('Cache-Control', 'no-store')
  async list(@Req() req: Request): Promise<{ schedules: ScheduleView[] }> {
    return { schedules: await this.schedules.list(applicationNameOf(req), this.base(req)) };
  }

  /** 201 with the schedule and its Location. */
  @Post()
  @Access('applicationAdmin')
  @RawData()
  @UseGuards(ApplicationNameGuard)
  @Header('Cache-Control', 'no-store')
  async create(
    @Req() req: Request,
    @JsonBody(SCHEDULE_BODY) body: ScheduleDto,
  ): Promise<HttpAnswer> {
    const schedule = await this.schedules.create(applicationNameOf(req), body, this.base(req));
    return new HttpAnswer(schedule, { status: 201, headers: { Location: schedule.selfUri } });
  }

  @Get(':id')
  @Access('applicationAdmin')
  @RawData()
  @UseGuards(ApplicationNameGuard)
  @Header('Cache-Control', 'no-store')
  get(@Req() req: Request, @Param('id') id: string): Promise<ScheduleView> {
    return this.schedules.get(applicationNameOf(req), id, this.base(req));
  }

  @Put(':id')
  @Access('applicationAdmin')
  @RawData()
  @UseGuards(ApplicationNameGuard)
  @Header('Cache-Control', 'no-store')
  replace(
    @Req() req: Request,
    @Param('id') id: string,
    @JsonBody(SCHEDULE_BODY) body: ScheduleDto,
  ): Promise<ScheduleView> {
    return this.schedules.replace(applicationNameOf(req), id, body, this.base(req));
  }

  @Delete(':id')
  @Access('applicationAdmin')
  @UseGuards(ApplicationNameGuard)
  @HttpCode(204)
  async remove(@Req() req: Request, @Param('id') id: string): Promise<void> {
    await this.schedules.remove(applicationNameOf(req), id);
  }

  @Post(':id/pause')
  @Access('applicationAdmin')
  @RawData()
  @UseGuards(ApplicationNameGuard)
  @HttpCode(200)
  @Header('Cache-Control', 'no-store')
  pause(@Req() req: Request, @Param('id') id: string): Promise<ScheduleView> {
    return this.setPaused(req, id, true);
  }

  @Post(':id/resume')
  @Access('applicationAdmin')
  @RawData()
  @UseGuards(ApplicationNameGuard)
  @HttpCode(200)
  @Header('Cache-Control', 'no-store')
  resume(@Req() req: Request, @Param('id') id: string): Promise<ScheduleView> {
    return this.setPaused(req, id, false);
  }

  private setPaused(req: Request, id: string, paused: boolean): Promise<ScheduleView> {
    return this.schedules.setPaused(applicationNameOf(req), id, paused, this.base(req));
  }
}
