import { Controller, Get, Header } from '@nestjs/common';
import { HttpAnswer } from '../common/http-answer';
import { RawData } from '../common/negotiation.guard';
import { Access } from '../security/access.decorator';
import { MetricsService } from './metrics.service';

/** `GET /metrics` at the server root, as Prometheus expects (SPEC §9). */
@Controller('metrics')
export class MetricsController {
  constructor(private readonly metrics: MetricsService) {}

  @Get()
  @Access('public')
  @RawData()
  @Header('Cache-Control', 'no-store')
  async scrape(): Promise<HttpAnswer> {
    const body = await this.metrics.render();
    return new HttpAnswer(body, { headers: { 'Content-Type': this.metrics.contentType } });
  }
}
