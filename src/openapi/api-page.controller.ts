import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Controller, Get, Param, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { ApiError } from '../common/api-error';
import { RawData } from '../common/negotiation.guard';
import { loadStaticFile, sendStaticFile, StaticFile } from '../common/static-page';
import { Access } from '../security/access.decorator';

/** The page's own files, copied next to the compiled controller by the build. */
const STATIC_DIR = join(__dirname, 'static');
const SWAGGER_UI_DIR = dirname(require.resolve('swagger-ui-dist/package.json'));

/** The files of swagger-ui-dist the page uses; nothing else of the package is served. */
const SWAGGER_UI_ASSETS: Record<string, string> = {
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui.css': 'text/css; charset=utf-8',
  'index.css': 'text/css; charset=utf-8',
  'favicon-32x32.png': 'image/png',
  'favicon-16x16.png': 'image/png',
};

/**
 * The REST API's OpenAPI description shown with Swagger UI at /svc/api/, served entirely by the
 * service (no CDN) under the pages' Content-Security-Policy. Accept does not apply.
 */
@Controller('svc/api')
@Access('public')
export class ApiPageController {
  private readonly page = loadStaticFile(
    join(STATIC_DIR, 'index.html'),
    'text/html; charset=utf-8',
  );
  private readonly script = loadStaticFile(
    join(STATIC_DIR, 'api-page.js'),
    'text/javascript; charset=utf-8',
  );
  /** Read on first use: the bundle is 1.7 MB that a node whose page nobody opens need not hold. */
  private readonly assets = new Map<string, Promise<StaticFile>>();

  @Get()
  @RawData()
  index(@Req() req: Request, @Res() res: Response): void {
    if (!req.path.endsWith('/')) {
      // The page's links are relative to /svc/api/; relative, so it works under a proxy prefix.
      res.redirect(302, 'api/');
      return;
    }
    sendStaticFile(res, this.page);
  }

  @Get('api-page.js')
  @RawData()
  pageScript(@Res() res: Response): void {
    sendStaticFile(res, this.script);
  }

  @Get('swagger-ui/:asset')
  @RawData()
  async swaggerUi(@Param('asset') asset: string, @Res() res: Response): Promise<void> {
    const type = Object.hasOwn(SWAGGER_UI_ASSETS, asset) ? SWAGGER_UI_ASSETS[asset] : undefined;
    if (type === undefined) {
      throw ApiError.notFound(`No file ${asset.slice(0, 80)} of Swagger UI.`);
    }
    let file = this.assets.get(asset);
    if (!file) {
      file = readFile(join(SWAGGER_UI_DIR, asset)).then((body) => ({ type, body }));
      this.assets.set(asset, file);
    }
    sendStaticFile(res, await file);
  }
}
