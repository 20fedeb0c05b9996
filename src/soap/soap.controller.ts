import { All, Controller, Get, HttpStatus, Post, Req, UseFilters } from '@nestjs/common';
import type { Request } from 'express';
import { HttpAnswer } from '../common/http-answer';
import { ClientGone } from '../common/query-parameters';
import { RawData } from '../common/negotiation.guard';
import { publicBaseUrl } from '../common/public-uri';
import { NodeConfig } from '../config/config-slices';
import { Access } from '../security/access.decorator';
import { SoapFaultFilter } from './soap-fault.filter';
import { SoapService } from './soap.service';
import { XML_TEXT } from './wsdl.controller';
import { WsdlService } from './wsdl.service';

const ALLOWED_METHODS = 'GET, POST';

function asksForWsdl(req: Request): boolean {
  return Object.keys(req.query).some((key) => key.toLowerCase() === 'wsdl');
}

function plainAnswer(
  status: number,
  message: string,
  headers: Record<string, string> = {},
): HttpAnswer {
  return new HttpAnswer(`${message}\n`, {
    status,
    headers: { 'Content-Type': 'text/plain; charset=utf-8', ...headers },
  });
}

/**
 * The SOAP endpoint (SPEC §7): `POST` a Process request, `GET ?wsdl` for the WSDL. Every route
 * is @RawData (Accept does not apply) and its errors are SOAP faults (SoapFaultFilter).
 */
@Controller('svc/api/soap/mtom-jobs')
// Public at the HTTP level: the application is named inside the envelope, so SoapJobService
// authenticates the caller once it has read it and the intake authorizes the submission (401 and
// 403 become faults there).
@Access('public')
@UseFilters(SoapFaultFilter)
export class SoapController {
  constructor(
    private readonly config: NodeConfig,
    private readonly soap: SoapService,
    private readonly wsdl: WsdlService,
  ) {}

  @Get()
  @RawData()
  describe(@Req() req: Request): HttpAnswer {
    if (!asksForWsdl(req)) {
      // Not a SOAP request, so no Fault (WS-I R1126 ties a Fault to HTTP 500).
      return plainAnswer(
        HttpStatus.BAD_REQUEST,
        `GET ${req.path} answers only the WSDL (?wsdl); SOAP requests are POSTed here.`,
      );
    }
    return new HttpAnswer(this.wsdl.wsdl(publicBaseUrl(req, this.config.publicBaseUrl)), {
      status: HttpStatus.OK,
      headers: { 'Content-Type': XML_TEXT },
    });
  }

  @Post()
  @RawData()
  process(@Req() req: Request, @ClientGone() clientGone: AbortSignal): Promise<HttpAnswer> {
    return this.soap.process(req, clientGone);
  }

  /** WS-I BP R1114: another method is a 405. */
  @All()
  @RawData()
  other(@Req() req: Request): HttpAnswer {
    return plainAnswer(
      HttpStatus.METHOD_NOT_ALLOWED,
      `${req.method} is not allowed on ${req.path}; allowed: ${ALLOWED_METHODS} (GET with ?wsdl only).`,
      { Allow: ALLOWED_METHODS },
    );
  }
}
