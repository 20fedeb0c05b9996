import { Controller, Get, Header, HttpStatus, Param, Put, Req } from '@nestjs/common';
import type { Request } from 'express';
import { ApiError } from '../common/api-error';
import { ApplicationNamePipe } from '../common/application-name';
import { HttpAnswer } from '../common/http-answer';
import { JsonBody } from '../common/json-body';
import { RawData } from '../common/negotiation.guard';
import { ApplicationEntryDto } from '../applications/application-entry.dto';
import {
  applicationEtag,
  ApplicationSettingsService,
} from '../applications/application-settings.service';
import { Access } from '../security/access.decorator';
import { principalOf } from '../security/principal';
import { ApplicationListEntry, ApplicationsDirectory } from './applications-directory.service';

/** An application's rights and settings at run time (docs/api.md#application-settings): global admins, JSON. */
@Controller('svc/api/rest/admin/applications')
export class ApplicationsController {
  constructor(
    private readonly applications: ApplicationSettingsService,
    private readonly directory: ApplicationsDirectory,
  ) {}

  /** Every application known from the catalog, settings and jobs, with its jobs' counts. */
  @Get()
  @Access('globalAdmin')
  @RawData()
  @Header('Cache-Control', 'no-store')
  async list(): Promise<{ applications: ApplicationListEntry[] }> {
    return { applications: await this.directory.list() };
  }

  @Get(':app')
  @Access('globalAdmin')
  @RawData()
  @Header('Cache-Control', 'no-store')
  async read(@Param('app', ApplicationNamePipe) app: string): Promise<HttpAnswer> {
    if (!(await this.directory.exists(app))) {
      throw ApiError.notFound(unknownApplication(app));
    }
    const view = await this.applications.view(app);
    return new HttpAnswer(view, { headers: { ETag: applicationEtag(view.version) } });
  }

  @Put(':app')
  @Access('globalAdmin')
  @RawData()
  @Header('Cache-Control', 'no-store')
  async replace(
    @Param('app', ApplicationNamePipe) app: string,
    @Req() req: Request,
    @JsonBody() body: ApplicationEntryDto,
  ): Promise<HttpAnswer> {
    // Settings for a name nothing knows yet are made only on purpose: a misspelt name is a 404.
    const create = req.headers['if-none-match']?.trim() === '*';
    if (create && (await this.applications.view(app)).source === 'stored') {
      throw new ApiError(
        HttpStatus.PRECONDITION_FAILED,
        `${app} has stored settings already: GET them and send their ETag in If-Match instead of If-None-Match: *.`,
      );
    }
    if (!create && !(await this.directory.exists(app))) {
      throw ApiError.notFound(unknownApplication(app));
    }
    const replaced = await this.applications.replace(
      app,
      body,
      create ? '"0"' : req.headers['if-match'],
      principalOf(req)?.id ?? null,
    );
    return new HttpAnswer(
      { ...replaced.view, restartRequired: replaced.restartRequired },
      { headers: { ETag: applicationEtag(replaced.view.version) } },
    );
  }
}

function unknownApplication(app: string): string {
  return `No application ${app}: it has no catalog files, settings or jobs. To make settings for a new application, PUT them with If-None-Match: *.`;
}
