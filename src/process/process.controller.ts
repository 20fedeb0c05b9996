import { Controller, HttpCode, Post, Req, UseGuards } from '@nestjs/common';
import type { Request } from 'express';
import getRawBody from 'raw-body';
import { ApiError } from '../common/api-error';
import { ApplicationNameGuard, applicationNameOf } from '../common/application-name';
import { HttpAnswer } from '../common/http-answer';
import { mediaTypeOf } from '../common/media-type';
import { RawData } from '../common/negotiation.guard';
import { AppConfig } from '../config/app-config';
import { FunctionCallKind, KIND_OF_MEDIA_TYPE, payloadText } from '../jobs/function-call-result';
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
  const payload = payloadText(body);
  if (body.length === 0 || payload === null) {
    throw ApiError.badRequest(
      body.length === 0
        ? 'The request body is empty; send the payload of the function call.'
        : 'The request body is not UTF-8 text.',
    );
  }
  return { kind, payload };
}

/** `POST /process`: a function call answered at once with the function's string (SPEC §5.3). */
@Controller('svc/api/rest/process')
export class ProcessController {
  constructor(
    private readonly config: AppConfig,
    private readonly process: ProcessService,
  ) {}

  @Post()
  @Access('functionCall')
  @RawData()
  @UseGuards(ApplicationNameGuard)
  @HttpCode(200)
  async call(@Req() req: Request): Promise<HttpAnswer> {
    const applicationName = applicationNameOf(req);
    const { kind, payload } = await readCall(req, this.config.maxRequestBytes);
    const answer = await this.process.call(applicationName, kind, payload);
    return new HttpAnswer(answer.body, {
      status: answer.status,
      headers: { 'Content-Type': answer.contentType },
    });
  }
}
