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
import { ApiError } from '../common/api-error';
import { ApplicationNameGuard, applicationNameOf } from '../common/application-name';
import { HttpAnswer } from '../common/http-answer';
import { readLimitedBody } from '../common/limited-body';
import { mediaTypeOf } from '../common/media-type';
import { JsonRoutes } from '../common/negotiation.guard';
import { publicBaseUrl, REST_PREFIX } from '../common/public-uri';
import { NodeConfig } from '../config/config-slices';
import { Access } from '../security/access.decorator';
import { principalOf } from '../security/principal';
import { EnvironmentsService } from './environments.service';
import { environmentView, type EnvironmentView } from './environments-view';
import { MAX_LOCKFILE_BYTES } from './renv-lockfile';

/**
 * An application's R environment (admin API, docs/environments.md): the application in
 * X-SVC-Application-Name, as for its packages; its admins and the global admins only. JSON in
 * (the renv.lock itself) and out, never cached.
 */
@JsonRoutes()
@Controller('svc/api/rest/admin/environment')
export class EnvironmentsController {
  constructor(
    private readonly config: NodeConfig,
    private readonly environments: EnvironmentsService,
  ) {}

  @Get()
  @Access('applicationAdmin')
  @UseGuards(ApplicationNameGuard)
  @Header('Cache-Control', 'no-store')
  async get(@Req() req: Request): Promise<EnvironmentView> {
    const application = applicationNameOf(req);
    const environment = await this.environments.get(application);
    return environmentView(environment, await this.environments.pointers(application));
  }

  /** The body is the renv.lock. 201 with the new environment, 200 when it is the one asked for already. */
  @Put()
  @Access('applicationAdmin')
  @UseGuards(ApplicationNameGuard)
  @Header('Cache-Control', 'no-store')
  async set(@Req() req: Request): Promise<HttpAnswer> {
    if (mediaTypeOf(req) !== 'application/json') {
      throw ApiError.unsupportedMediaType('Send the renv.lock as application/json.');
    }
    const body = await readLimitedBody(
      req,
      MAX_LOCKFILE_BYTES,
      `An renv.lock may have at most ${MAX_LOCKFILE_BYTES} bytes.`,
    );
    const application = applicationNameOf(req);
    const { created, environment } = await this.environments.set(
      application,
      body,
      principalOf(req)?.id ?? 'anonymous',
    );
    const base = publicBaseUrl(req, this.config.publicBaseUrl);
    const pointers = await this.environments.pointers(application);
    return new HttpAnswer(environmentView(environment, pointers), {
      status: created ? 201 : 200,
      headers: { Location: `${base}${REST_PREFIX}/admin/environment/history/${environment.id}` },
    });
  }

  /** The application asks for no environment any more: its jobs use the node's library again. */
  @Delete()
  @Access('applicationAdmin')
  @UseGuards(ApplicationNameGuard)
  @HttpCode(204)
  async remove(@Req() req: Request): Promise<void> {
    await this.environments.remove(applicationNameOf(req));
  }

  @Get('history')
  @Access('applicationAdmin')
  @UseGuards(ApplicationNameGuard)
  @Header('Cache-Control', 'no-store')
  async history(@Req() req: Request): Promise<{ environments: EnvironmentView[] }> {
    const application = applicationNameOf(req);
    const [history, pointers] = await Promise.all([
      this.environments.history(application),
      this.environments.pointers(application),
    ]);
    return { environments: history.map((environment) => environmentView(environment, pointers)) };
  }

  @Get('history/:id')
  @Access('applicationAdmin')
  @UseGuards(ApplicationNameGuard)
  @Header('Cache-Control', 'no-store')
  async one(@Req() req: Request, @Param('id') id: string): Promise<EnvironmentView> {
    const application = applicationNameOf(req);
    const [environment, pointers] = await Promise.all([
      this.environments.one(application, id),
      this.environments.pointers(application),
    ]);
    return environmentView(environment, pointers);
  }

  /** Goes back to an environment of the history, without resolving or building anything. */
  @Post('history/:id/rollback')
  @Access('applicationAdmin')
  @UseGuards(ApplicationNameGuard)
  @HttpCode(200)
  @Header('Cache-Control', 'no-store')
  async rollback(@Req() req: Request, @Param('id') id: string): Promise<EnvironmentView> {
    const application = applicationNameOf(req);
    const environment = await this.environments.rollback(application, id);
    return environmentView(environment, await this.environments.pointers(application));
  }
}
