import { Module } from '@nestjs/common';
import { OpenApiService } from './openapi.service';

/**
 * The OpenAPI description of the REST API. OpenApiController is listed in ApiModule, before the
 * REST fallback that would otherwise take its paths.
 */
@Module({
  providers: [OpenApiService],
  exports: [OpenApiService],
})
export class OpenApiModule {}
