import type { Request } from 'express';
import { ApiError } from './api-error';
import { preferredMediaType } from './negotiation';
import type { RestFormat } from './representation/rest-representation';

/**
 * The answer formats of tables (usage statistics, the audit trail): XML and the two JSON shapes
 * as every representation, and CSV for spreadsheets.
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
