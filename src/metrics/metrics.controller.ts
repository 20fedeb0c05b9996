import { Controller, Get, Header, HttpStatus, Req } from '@nestjs/common';
import type { Request } from 'express';
import { ApiError } from '../common/api-error';
import { HttpAnswer } from '../common/http-answer';
import { RawData } from '../common/negotiation.guard';
import { AdminConfig } from '../config/config-slices';
import { Access } from '../security/access.decorator';
import { METRICS_CHALLENGE, metricsRefusal } from './metrics-access';
import { MetricsService } from './metrics.service';

/**
 * `GET /metrics` at the server root, as Prometheus expects (SPEC §9). Public to the API's own
 * authentication: its access rule is METRICS_ACCESS (metrics-access.ts).
 */
@Controller('metrics')
export class MetricsController {
  constructor(
    private readonly metrics: MetricsService,
    private readonly config: AdminConfig,
  ) {}

  @Get()
  @Access('public')
  @RawData()
  @Header('Cache-Control', 'no-store')
  async scrape(@Req() req: Request): Promise<HttpAnswer> {
    const refusal = metricsRefusal(this.config, req.headers.authorization);
    if (refusal !== null) {
      throw new ApiError(HttpStatus.UNAUTHORIZED, refusal, {
        'WWW-Authenticate': METRICS_CHALLENGE,
      });
    }
    const body = await this.metrics.render();
    return new HttpAnswer(body, { headers: { 'Content-Type': this.metrics.contentType } });
  }
}
