import { All, Controller, Get, Header, Req, Res } from '@nestjs/common';
import { RendersRepresentations } from '../common/representation.interceptor';
import type { Request, Response } from 'express';
import { methodNotAllowed } from '../common/method-not-allowed';
import { RawData } from '../common/negotiation.guard';
import { RestRepresentation } from '../common/representation/rest-representation';
import { Access } from '../security/access.decorator';
import { SystemService } from './system.service';

/** Health and node information (SPEC §9); public, for load balancers and orchestrators. */
@RendersRepresentations()
@Controller('svc/api/rest/system')
@Access('public')
export class SystemController {
  constructor(private readonly system: SystemService) {}

  /** 200 `OK` when the database answers and R evaluates 1+1; else 500 `ERROR`. */
  @Get('health/check')
  @RawData()
  @Header('Cache-Control', 'no-store')
  async check(@Res() res: Response): Promise<void> {
    const health = await this.system.check();
    res
      .status(health.healthy ? 200 : 500)
      .type('text/plain; charset=utf-8')
      .send(health.healthy ? 'OK' : 'ERROR');
  }

  /** The process is up and serving HTTP; checks nothing else (a restart would not help). */
  @Get('health/live')
  @RawData()
  @Header('Cache-Control', 'no-store')
  live(@Res() res: Response): void {
    res.status(200).json({ status: 'up' });
  }

  /** 200 while the node can take requests (database answers, not shutting down), else 503. */
  @Get('health/ready')
  @RawData()
  @Header('Cache-Control', 'no-store')
  async ready(@Res() res: Response): Promise<void> {
    const { ready, reason } = await this.system.ready();
    res.status(ready ? 200 : 503).json(ready ? { status: 'up' } : { status: 'down', reason });
  }

  @Get('info')
  async info(): Promise<RestRepresentation> {
    return { element: 'nodeInformation', value: await this.system.information() };
  }

  @All(['health/check', 'health/live', 'health/ready', 'info'])
  other(@Req() req: Request): never {
    throw methodNotAllowed(req, ['GET', 'HEAD']);
  }
}
