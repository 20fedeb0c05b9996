import { Controller, Get, Header, Query, Req } from '@nestjs/common';
import type { Request } from 'express';
import { checkApplicationName } from '../common/application-name';
import { HttpAnswer } from '../common/http-answer';
import { publicBaseUrl } from '../common/public-uri';
import { NodeConfig } from '../config/config-slices';
import { RawData } from '../common/negotiation.guard';
import {
  choiceParameter,
  textParameter,
  timeParameter,
  wholeNumber,
} from '../common/query-parameters';
import { tableAnswer, tableFormatOf } from '../common/table-format';
import { AUDIT_ACTIONS, AuditService } from '../audit/audit.service';
import { Access } from '../security/access.decorator';
import { renderAuditEvents } from './audit-view';

const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1000;
const MAX_OFFSET = 1_000_000;

/** The audit trail (docs/api.md#audit-trail): global admins; XML, JSON or CSV. */
@Controller('svc/api/rest/admin/audit')
export class AuditController {
  constructor(
    private readonly audit: AuditService,
    private readonly node: NodeConfig,
  ) {}

  @Get()
  @Access('globalAdmin')
  @RawData()
  @Header('Cache-Control', 'no-store')
  async list(@Req() req: Request, @Query() query: Record<string, unknown>): Promise<HttpAnswer> {
    const answer = tableFormatOf(req, typeof query.format === 'string' ? query.format : undefined);
    const action = choiceParameter(
      textParameter(query.action, 'action') ?? undefined,
      'action',
      AUDIT_ACTIONS,
    );
    const application = textParameter(query.application, 'application');
    const filter = {
      from: timeParameter(query.from, 'from'),
      to: timeParameter(query.to, 'to'),
      principal: textParameter(query.principal, 'principal'),
      applicationName:
        application === null
          ? null
          : checkApplicationName(application, 'The application parameter'),
      action,
      limit: wholeNumber(query.limit, 'limit', DEFAULT_LIMIT, 1, MAX_LIMIT),
      offset: wholeNumber(query.offset, 'offset', 0, 0, MAX_OFFSET),
    };
    const rows = await this.audit.list(filter);
    const more = rows.length > filter.limit;
    const headers: Record<string, string> = {};
    if (more) {
      // The next page: the same query with the offset moved on.
      const next = new URLSearchParams(
        Object.entries(query).filter(
          (entry): entry is [string, string] => typeof entry[1] === 'string',
        ),
      );
      next.set('offset', String(filter.offset + filter.limit));
      headers.Link = `<${req.path}?${next.toString()}>; rel="next"`;
    }
    const body = renderAuditEvents(
      rows.slice(0, filter.limit),
      more,
      answer.format,
      publicBaseUrl(req, this.node.publicBaseUrl),
    );
    return tableAnswer(answer, body, 'audit.csv', headers);
  }
}
