import { csvTable, TableFormat } from '../common/table-format';
import type { AuditEventEntity } from '../audit/audit-event.entity';
import { consoleJobUri } from '../common/public-uri';
import { RestElement, renderRepresentation } from '../common/representation/rest-representation';

/** The columns of an audit event, in the order of its CSV and its XML element's children. */
const COLUMNS = [
  'id',
  'time',
  'principal',
  'authMethod',
  'clientAddress',
  'requestId',
  'action',
  'application',
  'jobId',
  'jobUri',
  'outcome',
  'details',
] as const;

type EventView = Record<(typeof COLUMNS)[number], string | null>;

/** The XML element's children: rest-data.xsd's auditEvent, which has no jobUri. */
const XML_COLUMNS = COLUMNS.filter((column) => column !== 'jobUri');

function viewOf(event: AuditEventEntity, base: string): EventView {
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
    jobUri:
      event.jobId === null || event.applicationName === null
        ? null
        : consoleJobUri(base, event.applicationName, event.jobId),
    outcome: event.outcome,
    details: event.details === null ? null : JSON.stringify(event.details),
  };
}

/**
 * A page of the audit trail as CSV (a spreadsheet's download), JSON or XML; `base` the public
 * base URL of the rows' links to their jobs in the console (`jobUri`, JSON and CSV).
 */
export function renderAuditEvents(
  rows: AuditEventEntity[],
  more: boolean,
  format: TableFormat,
  base: string,
): string {
  const events = rows.map((row) => viewOf(row, base));
  if (format === 'csv') {
    return csvTable(COLUMNS, events);
  }
  if (format === 'json' || format === 'mapped-json') {
    // One shape for both: the trail's JSON has always been plain (a list is an array).
    return JSON.stringify({ auditEvents: events, more });
  }
  // rest-data.xsd's auditEvents, written as the REST representations are.
  const list: RestElement = {
    name: 'auditEvents',
    attributes: { more },
    children: events.map((event) => ({
      name: 'auditEvent',
      attributes: {},
      children: XML_COLUMNS.flatMap((column) => {
        const value = event[column];
        return value === null ? [] : [{ name: column, attributes: {}, text: value }];
      }),
    })),
  };
  return renderRepresentation({ toElement: () => list }, 'xml');
}
