import { Controller, Post, Req, Res, UseGuards } from '@nestjs/common';
import type { Request, Response } from 'express';
import getRawBody from 'raw-body';
import { ApiError } from '../common/api-error';
import { ApplicationNameGuard, applicationNameOf } from '../common/application-name';
import { mediaTypeOf } from '../common/media-type';
import { ErrorsAsSent, RawData } from '../common/negotiation.guard';
import { ProcessConfig } from '../config/config-slices';
import {
  FunctionCallKind,
  KIND_OF_MEDIA_TYPE,
  functionCallText,
} from '../job-core/function-call-result';
import { Access } from '../security/access.decorator';
import { ProcessService } from './process.service';

/** The call's kind from its Content-Type (415) and its payload (413 above MAX_REQUEST_BYTES, 400). */
async function readCall(
  req: Request,
  maxBytes: number,
): Promise<{ kind: FunctionCallKind; payload: string }> {
  const kind = KIND_OF_MEDIA_TYPE[mediaTypeOf(req)];
  if (!kind) {
    throw ApiError.unsupportedMediaType(
      'Content-Type must be application/xml or application/json for a function call.',
    );
  }
  const body = await getRawBody(req, { limit: maxBytes });
  return { kind, payload: functionCallText(kind, body) };
}

/** `POST /process`: a function call answered at once with the function's string (SPEC §5.3). */
@Controller('svc/api/rest/process')
@ErrorsAsSent()
export class ProcessController {
  constructor(
    private readonly config: ProcessConfig,
    private readonly process: ProcessService,
  ) {}

  @Post()
  @Access('functionCall')
  @RawData()
  @UseGuards(ApplicationNameGuard)
  // Writes its answer itself: returned as a value (HttpAnswer, Express's send) the same call
  // cost 0.4-0.5 ms more CPU on this, the hottest route (docs/performance.md).
  async call(@Req() req: Request, @Res() res: Response): Promise<void> {
    const applicationName = applicationNameOf(req);
    const { kind, payload } = await readCall(req, this.config.maxRequestBytes);
    const answer = await this.process.call(applicationName, kind, payload);
    res.status(answer.status).setHeader('Content-Type', answer.contentType);
    res.end(answer.body);
  }
}
