import {
  Controller,
  Delete,
  Get,
  Header,
  HttpCode,
  Param,
  Put,
  Req,
  UseGuards,
} from '@nestjs/common';
import type { Request } from 'express';
import { ApplicationNameGuard, applicationNameOf } from '../common/application-name';
import { HttpAnswer } from '../common/http-answer';
import { readLimitedBody } from '../common/limited-body';
import { RawData } from '../common/negotiation.guard';
import { publicBaseUrl } from '../common/public-uri';
import { RendersRepresentations } from '../common/representation.interceptor';
import { RestView } from '../common/representation/rest-representation';
import { AppConfig } from '../config/app-config';
import { AdminConfig, NodeConfig } from '../config/config-slices';
import { Access } from '../security/access.decorator';
import { catalogFileUri, CatalogAdminService } from './catalog-admin.service';
import { CatalogRepresentation } from './catalog-view';
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
    private readonly node: NodeConfig,
    private readonly admin: AdminConfig,
    /** Whole, for one reader only: the masked effective configuration shows every setting. */
    private readonly effective: AppConfig,
    private readonly catalog: CatalogAdminService,
  ) {}

  @Get('catalog')
  @Access('applicationAdmin')
  @UseGuards(ApplicationNameGuard)
  async listCatalog(@Req() req: Request): Promise<RestView> {
    const base = publicBaseUrl(req, this.node.publicBaseUrl);
    return new CatalogRepresentation(await this.catalog.view(applicationNameOf(req), base));
  }

  @Get('catalog/:section/*file')
  @Access('applicationAdmin')
  @RawData()
  @UseGuards(ApplicationNameGuard)
  async readFile(
    @Req() req: Request,
    @Param('section') section: string,
    @Param('file') file: string[],
  ): Promise<HttpAnswer> {
    const name = fileName(file);
    const content = await this.catalog.read(applicationNameOf(req), section, name);
    return new HttpAnswer(content, {
      headers: {
        'Content-Type': TEXT_EXTENSIONS.test(name)
          ? 'text/plain; charset=utf-8'
          : 'application/octet-stream',
      },
    });
  }

  /** The body is the file, as is. 201 with Location when new, 204 when replaced. */
  @Put('catalog/:section/*file')
  @Access('applicationAdmin')
  @UseGuards(ApplicationNameGuard)
  async writeFile(
    @Req() req: Request,
    @Param('section') section: string,
    @Param('file') file: string[],
  ): Promise<HttpAnswer> {
    const name = fileName(file);
    const limit = this.admin.catalogMaxFileBytes;
    const content = await readLimitedBody(
      req,
      limit,
      `A catalog file may have at most ${limit} bytes (CATALOG_MAX_FILE_BYTES).`,
    );
    const created = await this.catalog.write(applicationNameOf(req), section, name, content);
    const base = publicBaseUrl(req, this.node.publicBaseUrl);
    return HttpAnswer.createdOrReplaced(created, catalogFileUri(base, section, name));
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

  /** The effective configuration with secrets masked. */
  @Get('system/configuration')
  @Access('globalAdmin')
  @RawData()
  @Header('Cache-Control', 'no-store')
  configuration(): object {
    return maskedConfiguration(this.effective);
  }
}
