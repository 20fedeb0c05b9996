import { Controller, Get, Param, Req } from '@nestjs/common';
import type { Request } from 'express';
import { HttpAnswer } from '../common/http-answer';
import { ApiError } from '../common/api-error';
import { RawData } from '../common/negotiation.guard';
import { publicBaseUrl } from '../common/public-uri';
import { NodeConfig } from '../config/config-slices';
import { Access } from '../security/access.decorator';
import { WsdlService } from './wsdl.service';

/** The content type of WSDL and XSD answers: what SOAP tool chains expect for both. */
export const XML_TEXT = 'text/xml; charset=utf-8';

/** `GET /svc/wsdl/<file>`: every file of `wsdl/` (SPEC §7), public. */
@Controller('svc/wsdl')
@Access('public')
export class WsdlController {
  constructor(
    private readonly config: NodeConfig,
    private readonly wsdl: WsdlService,
  ) {}

  @Get(':file')
  @RawData()
  file(@Param('file') name: string, @Req() req: Request): HttpAnswer {
    const content = this.wsdl.file(name, publicBaseUrl(req, this.config.publicBaseUrl));
    if (content === undefined) {
      throw ApiError.notFound(
        `No file ${name} under /svc/wsdl/; the files are: ${this.wsdl.fileNames().join(', ')}.`,
      );
    }
    return new HttpAnswer(content, { headers: { 'Content-Type': XML_TEXT } });
  }
}
