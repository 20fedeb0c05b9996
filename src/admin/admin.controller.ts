import {
  All,
  Controller,
  Delete,
  Get,
  Header,
  HttpCode,
  Param,
  Put,
  Req,
  Res,
  UseGuards,
} from '@nestjs/common';
import { RendersRepresentations } from '../common/representation.interceptor';
import type { Request, Response } from 'express';
import { ApplicationNameGuard, applicationNameOf } from '../common/application-name';
import { readLimitedBody } from '../common/limited-body';
import { methodNotAllowed } from '../common/method-not-allowed';
import { RawData } from '../common/negotiation.guard';
import { publicBaseUrl } from '../common/public-uri';
import { RestRepresentation } from '../common/representation/rest-representation';
import { AppConfig } from '../config/app-config';
import { Access } from '../security/access.decorator';
import { catalogFileUri, CatalogAdminService } from './catalog-admin.service';
import { maskedConfiguration } from './masked-configuration';

/** Extensions of catalog files that are text; others are sent as bytes. */
const TEXT_EXTENSIONS = /\.(r|rnw|rmd|txt|properties|cfg|conf|csv|md|tex|html?|xml|json)$/i;

/** `{file}` of the route: Express hands the rest of the path over as its segments. */
function fileName(segments: string[] | string): string {
  return Array.isArray(segments) ? segments.join('/') : segments;
}

/** The admin API (SPEC §8): an application's catalog, and the node's configuration. */
@RendersRepresentations()
@Controller('svc/api/rest/admin')
export class AdminController {
  constructor(
    private readonly config: AppConfig,
    private readonly catalog: CatalogAdminService,
  ) {}

  @Get('catalog')
  @Access('applicationAdmin')
  @UseGuards(ApplicationNameGuard)
  async listCatalog(@Req() req: Request): Promise<RestRepresentation> {
    const base = publicBaseUrl(req, this.config.publicBaseUrl);
    return { element: 'catalog', value: await this.catalog.view(applicationNameOf(req), base) };
  }

  @All('catalog')
  @Access('public')
  otherOnCatalog(@Req() req: Request): never {
    throw methodNotAllowed(req, ['GET', 'HEAD']);
  }

  @Get('catalog/:section/*file')
  @Access('applicationAdmin')
  @RawData()
  @UseGuards(ApplicationNameGuard)
  async readFile(
    @Req() req: Request,
    @Res() res: Response,
    @Param('section') section: string,
    @Param('file') file: string[],
  ): Promise<void> {
    const name = fileName(file);
    const content = await this.catalog.read(applicationNameOf(req), section, name);
    res
      .status(200)
      .type(TEXT_EXTENSIONS.test(name) ? 'text/plain; charset=utf-8' : 'application/octet-stream')
      .send(content);
  }

  /** The body is the file, as is. 201 with Location when new, 204 when replaced. */
  @Put('catalog/:section/*file')
  @Access('applicationAdmin')
  @UseGuards(ApplicationNameGuard)
  async writeFile(
    @Req() req: Request,
    @Res() res: Response,
    @Param('section') section: string,
    @Param('file') file: string[],
  ): Promise<void> {
    const name = fileName(file);
    const limit = this.config.catalogMaxFileBytes;
    const content = await readLimitedBody(
      req,
      limit,
      `A catalog file may have at most ${limit} bytes (CATALOG_MAX_FILE_BYTES).`,
    );
    const applicationName = applicationNameOf(req);
    if (await this.catalog.write(applicationName, section, name, content)) {
      const base = publicBaseUrl(req, this.config.publicBaseUrl);
      res.status(201).setHeader('Location', catalogFileUri(base, section, name));
    } else {
      res.status(204);
    }
    res.end();
  }

  @Delete('catalog/:section/*file')
  @Access('applicationAdmin')
  @UseGuards(ApplicationNameGuard)
  @HttpCode(204)
  async deleteFile(
    @Req() req: Request,
    @Param('section') section: string,
    @Param('file') file: string[],
  ): Promise<void> {
    await this.catalog.remove(applicationNameOf(req), section, fileName(file));
  }

  @All('catalog/:section/*file')
  @Access('public')
  otherOnFile(@Req() req: Request): never {
    throw methodNotAllowed(req, ['GET', 'HEAD', 'PUT', 'DELETE']);
  }

  /** The effective configuration with secrets masked. */
  @Get('system/configuration')
  @Access('globalAdmin')
  @RawData()
  @Header('Cache-Control', 'no-store')
  configuration(@Res() res: Response): void {
    res.status(200).json(maskedConfiguration(this.config));
  }

  @All('system/configuration')
  @Access('public')
  otherOnConfiguration(@Req() req: Request): never {
    throw methodNotAllowed(req, ['GET', 'HEAD']);
  }
}
