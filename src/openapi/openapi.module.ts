import { dirname, join } from 'node:path';
import { Module, OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { servePageFiles } from '../common/static-page';
import { OpenApiService } from './openapi.service';

/** The files of swagger-ui-dist the API page uses; nothing else of the package is served. */
const SWAGGER_UI_FILES = [
  'swagger-ui-bundle.js',
  'swagger-ui.css',
  'index.css',
  'favicon-32x32.png',
  'favicon-16x16.png',
];

/**
 * The OpenAPI description of the REST API and the page that shows it with Swagger UI at
 * /svc/api/, served entirely by the service (no CDN); static/ is copied next to the compiled
 * module by the build. OpenApiController is listed in ApiModule, before the REST fallback that
 * would otherwise take its paths.
 */
@Module({
  providers: [OpenApiService],
  exports: [OpenApiService],
})
export class OpenApiModule implements OnModuleInit {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  onModuleInit(): void {
    servePageFiles(
      this.adapterHost.httpAdapter,
      // The page's links are relative to /svc/api/: the bare /svc/api redirects there.
      { at: '/svc/api', dir: join(__dirname, 'static'), index: 'slash' },
      {
        at: '/svc/api/swagger-ui',
        dir: dirname(require.resolve('swagger-ui-dist/package.json')),
        only: Object.fromEntries(SWAGGER_UI_FILES.map((name) => [name, name])),
      },
    );
  }
}
