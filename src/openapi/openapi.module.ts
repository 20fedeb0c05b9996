import { Module } from '@nestjs/common';
import { ApiPageController } from './api-page.controller';
import { OpenApiService } from './openapi.service';

/**
 * The OpenAPI description of the REST API and the page that shows it. OpenApiController is listed
 * in ApiModule, before the REST fallback that would otherwise take its paths.
 */
@Module({
  controllers: [ApiPageController],
  providers: [OpenApiService],
  exports: [OpenApiService],
})
export class OpenApiModule {}
