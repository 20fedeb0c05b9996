import { Controller, Get, Header, Req } from '@nestjs/common';
import type { Request } from 'express';
import { HttpAnswer } from '../common/http-answer';
import { RawData } from '../common/negotiation.guard';
import { publicBaseUrl } from '../common/public-uri';
import { RestApiConfig } from '../config/config-slices';
import { Access } from '../security/access.decorator';
import { OpenApiService } from './openapi.service';

/** The OpenAPI description of the REST API, as JSON and as YAML; Accept does not apply. */
@Controller('svc/api/rest')
@Access('public')
export class OpenApiController {
  constructor(
    private readonly config: RestApiConfig,
    private readonly openApi: OpenApiService,
  ) {}

  @Get('openapi.json')
  @RawData()
  @Header('Cache-Control', 'no-cache')
  json(@Req() req: Request): HttpAnswer {
    const body = this.openApi.json(publicBaseUrl(req, this.config.publicBaseUrl));
    return new HttpAnswer(body, { headers: { 'Content-Type': 'application/json; charset=utf-8' } });
  }

  @Get('openapi.yaml')
  @RawData()
  @Header('Cache-Control', 'no-cache')
  yaml(@Req() req: Request): HttpAnswer {
    const body = this.openApi.yaml(publicBaseUrl(req, this.config.publicBaseUrl));
    return new HttpAnswer(body, { headers: { 'Content-Type': 'application/yaml; charset=utf-8' } });
  }
}
