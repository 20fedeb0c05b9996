import {
  Controller,
  Delete,
  Get,
  Header,
  HttpStatus,
  Param,
  Post,
  Req,
  UseGuards,
} from '@nestjs/common';
import type { Request } from 'express';
import {
  ApplicationNameGuard,
  applicationNameOf,
  ApplicationNamePipe,
} from '../common/application-name';
import { ApiError } from '../common/api-error';
import { HttpAnswer } from '../common/http-answer';
import { JsonBody, JsonBodyRule } from '../common/json-body';
import { RawData } from '../common/negotiation.guard';
import { publicBaseUrl, RestLinks } from '../common/public-uri';
import { RestApiConfig } from '../config/config-slices';
import { Access } from '../security/access.decorator';
import { principalOf } from '../security/principal';
import { FLOW_MAX_BYTES, flowStepsOf } from './flow-definition';
import { FlowsService } from './flows.service';
import type { FlowView } from './flows-view';

const FLOW_BODY: JsonBodyRule = {
  maxBytes: FLOW_MAX_BYTES,
  wrongType: 'A flow is sent as application/json.',
  tooLarge: `A flow may have at most ${FLOW_MAX_BYTES} bytes.`,
};

/** A flow's id in the path: a UUID, else 400 before any look-up (as a job's id). */
function flowIdOf(value: string): string {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value)) {
    throw ApiError.badRequest(`${JSON.stringify(value.slice(0, 64))} is not a flow id (a UUID).`);
  }
  return value.toLowerCase();
}

/**
 * Flows (docs/flows.md): one request of steps that are jobs. The application in
 * X-SVC-Application-Name as for a job; each step is authorized, limited and audited by the
 * intake. JSON in and out, never cached (a flow's state changes as its steps end).
 */
@Controller('svc/api/rest/flows')
export class FlowsController {
  constructor(
    private readonly config: RestApiConfig,
    private readonly flows: FlowsService,
  ) {}

  private links(req: Request): RestLinks {
    return new RestLinks(publicBaseUrl(req, this.config.publicBaseUrl));
  }

  /** 202 with the flow's token and its Location. */
  @Post()
  @Access('submitJob')
  @RawData()
  @UseGuards(ApplicationNameGuard)
  @Header('Cache-Control', 'no-store')
  async submit(@Req() req: Request, @JsonBody(FLOW_BODY) body: unknown): Promise<HttpAnswer> {
    const token = await this.flows.submit(
      applicationNameOf(req),
      flowStepsOf(body),
      principalOf(req) ?? null,
      this.links(req),
    );
    return new HttpAnswer(token, {
      status: HttpStatus.ACCEPTED,
      headers: { Location: token.flowUri },
    });
  }

  @Get(':app/:flowId')
  @Access('readResults')
  @RawData()
  @Header('Cache-Control', 'no-store')
  get(
    @Req() req: Request,
    @Param('app', ApplicationNamePipe) applicationName: string,
    @Param('flowId') flowId: string,
  ): Promise<FlowView> {
    return this.flows.get(applicationName, flowIdOf(flowId), this.links(req));
  }

  /** Cancels every step not ended: 202 with the flow, or 409 when it had ended already. */
  @Delete(':app/:flowId')
  @Access('cancelJob')
  @RawData()
  @Header('Cache-Control', 'no-store')
  async cancel(
    @Req() req: Request,
    @Param('app', ApplicationNamePipe) applicationName: string,
    @Param('flowId') flowId: string,
  ): Promise<HttpAnswer> {
    const id = flowIdOf(flowId);
    const cancelled = await this.flows.cancel(applicationName, id, principalOf(req)?.id ?? null);
    const flow = await this.flows.get(applicationName, id, this.links(req));
    return new HttpAnswer(flow, { status: cancelled ? HttpStatus.ACCEPTED : HttpStatus.CONFLICT });
  }
}
