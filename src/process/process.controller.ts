import { All, Controller, Post, Req, Res, UseGuards } from '@nestjs/common';
import type { Request, Response } from 'express';
import getRawBody from 'raw-body';
import { ApiError } from '../common/api-error';
import { ApplicationNameGuard, applicationNameOf } from '../common/application-name';
import { methodNotAllowed } from '../common/method-not-allowed';
import { RawData } from '../common/negotiation.guard';
import { AppConfig } from '../config/app-config';
import { KIND_OF_MEDIA_TYPE, payloadText } from '../jobs/function-call-result';
import { mediaTypeOf } from '../common/media-type';
import { Access } from '../security/access.decorator';
import { ProcessService } from './process.service';

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
  async call(@Req() req: Request, @Res() res: Response): Promise<void> {
    const applicationName = applicationNameOf(req);
    const kind = KIND_OF_MEDIA_TYPE[mediaTypeOf(req)];
    if (!kind) {
      throw ApiError.unsupportedMediaType(
        'Content-Type must be application/xml or application/json for a function call.',
      );
    }
    const body = await getRawBody(req, { limit: this.config.maxRequestBytes });
    const payload = payloadText(body);
    if (body.length === 0 || payload === null) {
      throw ApiError.badRequest(
        body.length === 0
          ? 'The request body is empty; send the payload of the function call.'
          : 'The request body is not UTF-8 text.',
      );
    }
    const answer = await this.process.call(applicationName, kind, payload);
    res.status(answer.status).setHeader('Content-Type', answer.contentType);
    res.end(answer.body);
  }

  @All()
  @Access('public')
  other(@Req() req: Request): never {
    throw methodNotAllowed(req, ['POST']);
  }
}
