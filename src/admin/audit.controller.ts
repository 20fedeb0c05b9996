import { Controller, Get, Header, Query, Req } from '@nestjs/common';
import type { Request } from 'express';
import { create } from 'xmlbuilder2';
import { ApiError } from '../common/api-error';
import { checkApplicationName } from '../common/application-name';
import { HttpAnswer } from '../common/http-answer';
import { RawData } from '../common/negotiation.guard';
import { TableFormat, tableFormatOf } from '../common/table-format';
import { AUDIT_ACTIONS, AuditService } from '../audit/audit.service';
import type { AuditEventEntity } from '../audit/audit-event.entity';
import { Access } from '../security/access.decorator';

const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1000;
const MAX_OFFSET = 1_000_000;
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;
const CSV_COLUMNS = [
  'id',
  'time',
  'principal',
  'authMethod',
  'clientAddress',
  'requestId',
  'action',
  'application',
  'jobId',
  'outcome',
  'details',
] as const;

type EventView = Record<(typeof CSV_COLUMNS)[number], string | null>;

function viewOf(event: AuditEventEntity): EventView {
  return {
    id: String(event.id),
    time: new Date(event.time).toISOString(),
    principal: event.principal,
    authMethod: event.authMethod,
    clientAddress: event.clientAddress,
    requestId: event.requestId,
    action: event.action,
    application: event.applicationName,
    jobId: event.jobId,
    outcome: event.outcome,
    details: event.details === null ? null : JSON.stringify(event.details),
  };
}

/** RFC 4180 quoting; a cell a spreadsheet would run as a formula gets a leading quote. */
function csvCell(value: string | null): string {
  if (value === null) {
    return '';
  }
  const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}

function timeParameter(value: unknown, name: string): Date | null {
  if (value === undefined || value === '') {
    return null;
  }
  if (typeof value !== 'string' || !ISO_TIME.test(value) || Number.isNaN(Date.parse(value))) {
    throw ApiError.badRequest(
      `${name} must be a time in ISO 8601 with a zone, e.g. 2026-11-01T00:00:00Z.`,
    );
  }
  return new Date(value);
}

function wholeNumber(
  value: unknown,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
  if (value === undefined || value === '') {
    return fallback;
  }
  const number = typeof value === 'string' && /^\d{1,7}$/.test(value) ? Number(value) : NaN;
  if (!(number >= min && number <= max)) {
    throw ApiError.badRequest(`${name} must be a whole number from ${min} to ${max}.`);
  }
  return number;
}

function textParameter(value: unknown, name: string): string | null {
  if (value === undefined || value === '') {
    return null;
  }
  if (typeof value !== 'string' || value.length > 256) {
    throw ApiError.badRequest(`${name} must be given once, at most 256 characters.`);
  }
  return value;
}

/** The trail's page as CSV (a spreadsheet's download), JSON or XML. */
function renderEvents(events: EventView[], more: boolean, format: TableFormat): string {
  if (format === 'csv') {
    const lines = [
      CSV_COLUMNS.join(','),
      ...events.map((e) => CSV_COLUMNS.map((c) => csvCell(e[c])).join(',')),
    ];
    return `${lines.join('\r\n')}\r\n`;
  }
  if (format === 'json' || format === 'mapped-json') {
    // One shape for both: the trail's JSON has always been plain (a list is an array).
    return JSON.stringify({ auditEvents: events, more });
  }
  const root = create({
    version: '1.0',
    encoding: 'UTF-8',
    invalidCharReplacement: '\uFFFD',
  }).ele('urn:svc:rest:types', 'auditEvents', { more: String(more) });
  for (const event of events) {
    const element = root.ele('auditEvent');
    for (const column of CSV_COLUMNS) {
      const value = event[column];
      if (value !== null) {
        element.ele(column).txt(value);
      }
    }
  }
  return root.end({ prettyPrint: false });
}

/** The audit trail (docs/api.md#audit-trail): global admins; XML, JSON or CSV. */
@Controller('svc/api/rest/admin/audit')
export class AuditController {
  constructor(private readonly audit: AuditService) {}

  @Get()
  @Access('globalAdmin')
  @RawData()
  @Header('Cache-Control', 'no-store')
  async list(@Req() req: Request, @Query() query: Record<string, unknown>): Promise<HttpAnswer> {
    const answer = tableFormatOf(req, typeof query.format === 'string' ? query.format : undefined);
    const action = textParameter(query.action, 'action');
    if (action !== null && !(AUDIT_ACTIONS as readonly string[]).includes(action)) {
      throw ApiError.badRequest(`action must be one of ${AUDIT_ACTIONS.join(', ')}.`);
    }
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
    const events = rows.slice(0, filter.limit).map(viewOf);
    const headers: Record<string, string> = {
      Vary: 'Accept',
      'Content-Type': `${answer.type}; charset=utf-8`,
    };
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
    if (answer.format === 'csv') {
      headers['Content-Disposition'] = 'attachment; filename="audit.csv"';
    }
    return new HttpAnswer(renderEvents(events, more, answer.format), { headers });
  }
}
