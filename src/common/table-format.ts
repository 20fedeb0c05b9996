import type { Request } from 'express';
import { ApiError } from './api-error';
import { HttpAnswer } from './http-answer';
import { preferredMediaType } from './negotiation';
import type { RestFormat } from './representation/rest-representation';

/**
 * The answer formats of tables (usage statistics, the audit trail): XML and the two JSON shapes
 * as every representation, and CSV for spreadsheets. The one CSV writer and the answer's headers
 * are here; each table renders its XML and JSON itself.
 */
export type TableFormat = RestFormat | 'csv';

const MEDIA_TYPES: Record<string, TableFormat> = {
  'application/vnd.svc+xml': 'xml',
  'application/vnd.svc+json': 'mapped-json',
  'application/xml': 'xml',
  'application/json': 'json',
  'text/csv': 'csv',
};
/** The type of each `?format=`: xml, json (plain) or csv. */
const FORMAT_MEDIA_TYPES: Record<'xml' | 'json' | 'csv', string> = {
  xml: 'application/vnd.svc+xml',
  json: 'application/json',
  csv: 'text/csv',
};

/** `?format=` first (spreadsheet tools cannot set Accept), then Accept; XML by default. */
export function tableFormatOf(
  req: Request,
  format: string | undefined,
): { format: TableFormat; type: string } {
  if (format !== undefined) {
    if (format !== 'xml' && format !== 'json' && format !== 'csv') {
      throw ApiError.badRequest(`format must be xml, json or csv (got "${format.slice(0, 40)}").`);
    }
    return { format, type: FORMAT_MEDIA_TYPES[format] };
  }
  const accept = req.headers.accept;
  if (accept === undefined || accept.trim() === '') {
    return { format: 'xml', type: FORMAT_MEDIA_TYPES.xml };
  }
  const type = preferredMediaType(accept, Object.keys(MEDIA_TYPES));
  if (!type) {
    throw ApiError.notAcceptable(
      `Cannot answer in any type that Accept allows (${accept}); use application/vnd.svc+xml, application/vnd.svc+json or text/csv.`,
    );
  }
  return { format: MEDIA_TYPES[type], type };
}

/** A table's cell: text (quoted as CSV needs), a number, or nothing (an empty cell). */
export type TableCell = string | number | null;

/** RFC 4180 quoting; a text cell a spreadsheet would run as a formula gets a leading quote. */
function csvCell(value: TableCell): string {
  if (value === null) {
    return '';
  }
  if (typeof value === 'number') {
    return String(value);
  }
  const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}

/** The table as CSV: a header line of `columns`, then a line per row, CRLF after each. */
export function csvTable<C extends string>(
  columns: readonly C[],
  rows: ReadonlyArray<Readonly<Record<C, TableCell>>>,
): string {
  const lines = [
    columns.join(','),
    ...rows.map((row) => columns.map((column) => csvCell(row[column])).join(',')),
  ];
  return `${lines.join('\r\n')}\r\n`;
}

/**
 * A table's answer in its chosen `format`: Vary and Content-Type, then `headers`, and as CSV a
 * download named `csvFileName`.
 */
export function tableAnswer(
  answer: { format: TableFormat; type: string },
  body: string,
  csvFileName: string,
  headers: Readonly<Record<string, string>> = {},
): HttpAnswer {
  const all: Record<string, string> = {
    Vary: 'Accept',
    'Content-Type': `${answer.type}; charset=utf-8`,
    ...headers,
  };
  if (answer.format === 'csv') {
    all['Content-Disposition'] = `attachment; filename="${csvFileName}"`;
  }
  return new HttpAnswer(body, { headers: all });
}
