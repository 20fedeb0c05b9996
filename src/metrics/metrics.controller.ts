import { All, Controller, Get, Header, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { methodNotAllowed } from '../common/method-not-allowed';
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
  async scrape(@Res() res: Response): Promise<void> {
    const body = await this.metrics.render();
    res.status(200).setHeader('Content-Type', this.metrics.contentType);
    res.send(body);
  }

  @All()
  @Access('public')
  other(@Req() req: Request): never {
    throw methodNotAllowed(req, ['GET', 'HEAD']);
  }
}
