import { Controller, Delete, Get, HttpCode, Param, Put, Req, UseGuards } from '@nestjs/common';
import type { Request } from 'express';
import { ApplicationNameGuard, applicationNameOf } from '../common/application-name';
import { HttpAnswer } from '../common/http-answer';
import { readLimitedBody } from '../common/limited-body';
import { publicBaseUrl, REST_PREFIX } from '../common/public-uri';
import { RendersRepresentations } from '../common/representation.interceptor';
import { RestView } from '../common/representation/rest-representation';
import { NodeConfig } from '../config/config-slices';
import { Access } from '../security/access.decorator';
import { principalOf } from '../security/principal';
import { MAX_PACKAGE_BYTES, PackagesService } from './packages.service';
import { PackagesRepresentation } from './packages-view';

/**
 * An application's R packages (admin API): the application in X-SVC-Application-Name, as for
 * the catalog; its admins and the global admins only.
 */
@RendersRepresentations()
@Controller('svc/api/rest/admin')
export class PackagesController {
  constructor(
    private readonly config: NodeConfig,
    private readonly packages: PackagesService,
  ) {}

  @Get('packages')
  @Access('applicationAdmin')
  @UseGuards(ApplicationNameGuard)
  async list(@Req() req: Request): Promise<RestView> {
    return new PackagesRepresentation(await this.packages.list(applicationNameOf(req)));
  }

  /** The body is the source package (.tar.gz). 201 with Location when new, 204 when replaced. */
  @Put('packages/:name')
  @Access('applicationAdmin')
  @UseGuards(ApplicationNameGuard)
  async upload(@Req() req: Request, @Param('name') name: string): Promise<HttpAnswer> {
    const created = await this.packages.upload(
      applicationNameOf(req),
      name,
      req.headers['content-type'],
      () =>
        readLimitedBody(
          req,
          MAX_PACKAGE_BYTES,
          `A source package may have at most ${MAX_PACKAGE_BYTES} bytes.`,
        ),
      principalOf(req)?.id ?? 'anonymous',
    );
    const base = publicBaseUrl(req, this.config.publicBaseUrl);
    return HttpAnswer.createdOrReplaced(created, `${base}${REST_PREFIX}/admin/packages/${name}`);
  }

  @Delete('packages/:name')
  @Access('applicationAdmin')
  @UseGuards(ApplicationNameGuard)
  @HttpCode(204)
  async remove(@Req() req: Request, @Param('name') name: string): Promise<void> {
    await this.packages.remove(applicationNameOf(req), name);
  }
}
