import { Controller, Get, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
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
  json(@Req() req: Request, @Res() res: Response): void {
    const body = this.openApi.json(publicBaseUrl(req, this.config.publicBaseUrl));
    res.status(200).type('application/json; charset=utf-8').setHeader('Cache-Control', 'no-cache');
    res.send(body);
  }

  @Get('openapi.yaml')
  @RawData()
  yaml(@Req() req: Request, @Res() res: Response): void {
    const body = this.openApi.yaml(publicBaseUrl(req, this.config.publicBaseUrl));
    res.status(200).type('application/yaml; charset=utf-8').setHeader('Cache-Control', 'no-cache');
    res.send(body);
  }
}
