import { Controller, Get, Header, Param, Put, Req } from '@nestjs/common';
import type { Request } from 'express';
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

/** An application's rights and settings at run time (docs/api.md#application-settings): global admins, JSON. */
@Controller('svc/api/rest/admin/applications')
export class ApplicationsController {
  constructor(private readonly applications: ApplicationSettingsService) {}

  @Get(':app')
  @Access('globalAdmin')
  @RawData()
  @Header('Cache-Control', 'no-store')
  async read(@Param('app', ApplicationNamePipe) app: string): Promise<HttpAnswer> {
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
    const replaced = await this.applications.replace(
      app,
      body,
      req.headers['if-match'],
      principalOf(req)?.id ?? null,
    );
    return new HttpAnswer(
      { ...replaced.view, restartRequired: replaced.restartRequired },
      { headers: { ETag: applicationEtag(replaced.view.version) } },
    );
  }
}
