import { Controller, Get, Header } from '@nestjs/common';
import { HttpAnswer } from '../common/http-answer';
import { RawData } from '../common/negotiation.guard';
import { RendersRepresentations } from '../common/representation.interceptor';
import { RestView } from '../common/representation/rest-representation';
import { Access } from '../security/access.decorator';
import { NodeInformationRepresentation } from './system-view';
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
  @Header('Content-Type', 'text/plain; charset=utf-8')
  async check(): Promise<HttpAnswer> {
    const { healthy } = await this.system.check();
    return new HttpAnswer(healthy ? 'OK' : 'ERROR', { status: healthy ? 200 : 500 });
  }

  /** The process is up and serving HTTP; checks nothing else (a restart would not help). */
  @Get('health/live')
  @RawData()
  @Header('Cache-Control', 'no-store')
  live(): { status: 'up' } {
    return { status: 'up' };
  }

  /** 200 while the node can take requests (database answers, not shutting down), else 503. */
  @Get('health/ready')
  @RawData()
  @Header('Cache-Control', 'no-store')
  async ready(): Promise<HttpAnswer> {
    const { ready, reason } = await this.system.ready();
    return ready
      ? new HttpAnswer({ status: 'up' })
      : new HttpAnswer({ status: 'down', reason }, { status: 503 });
  }

  @Get('info')
  async info(): Promise<RestView> {
    return new NodeInformationRepresentation(await this.system.information());
  }
}
