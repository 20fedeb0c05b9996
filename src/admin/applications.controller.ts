import { All, Controller, Get, Param, Put, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { checkApplicationName } from '../common/application-name';
import { readJsonBody } from '../common/json-body';
import { methodNotAllowed } from '../common/method-not-allowed';
import { RawData } from '../common/negotiation.guard';
import {
  applicationEtag,
  ApplicationSettingsService,
} from '../applications/application-settings.service';
import { Access } from '../security/access.decorator';
import { principalOf } from '../security/principal';

const WHERE = 'The application name in the path';

/** An application's rights and settings at run time (docs/api.md#application-settings): global admins, JSON. */
@Controller('svc/api/rest/admin/applications')
export class ApplicationsController {
  constructor(private readonly applications: ApplicationSettingsService) {}

  @Get(':app')
  @Access('globalAdmin')
  @RawData()
  async read(@Param('app') app: string, @Res() res: Response): Promise<void> {
    const view = await this.applications.view(checkApplicationName(app, WHERE));
    res
      .status(200)
      .setHeader('Cache-Control', 'no-store')
      .setHeader('ETag', applicationEtag(view.version))
      .json(view);
  }

  @Put(':app')
  @Access('globalAdmin')
  @RawData()
  async replace(
    @Param('app') app: string,
    @Req() req: Request,
    @Res() res: Response,
  ): Promise<void> {
    const name = checkApplicationName(app, WHERE);
    const replaced = await this.applications.replace(
      name,
      await readJsonBody(req),
      req.headers['if-match'],
      principalOf(req)?.name ?? null,
    );
    res
      .status(200)
      .setHeader('Cache-Control', 'no-store')
      .setHeader('ETag', applicationEtag(replaced.view.version))
      .json({ ...replaced.view, restartRequired: replaced.restartRequired });
  }

  @All(':app')
  @Access('public')
  other(@Req() req: Request): never {
    throw methodNotAllowed(req, ['GET', 'HEAD', 'PUT']);
  }
}
