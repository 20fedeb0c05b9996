import { ApiError } from '../common/api-error';
import { APPLICATION_HEADER, checkApplicationName } from '../common/application-name';
import type { JobMeta } from '../job-core/job-input';
import { parseMetaFields } from '../job-core/job-meta';
import { CALLBACK_URL_HEADER } from '../callbacks/callback-url.policy';
import { parsePriority, PRIORITY_HEADER } from './job-priority';

/** The form field that carries job files (SPEC §6); `X-SVC-JobFile` without brackets is taken too. */
export const JOB_FILE_FIELD = 'X-SVC-JobFile[]';
const JOB_FILE_FIELDS = /^x-svc-jobfile(\[\])?$/i;

type Fields = Array<[name: string, value: string]>;

function sameName(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}

/** `X-SVC-Application-Name` from the form (any case): required, once, valid; else 400. */
export function applicationNameFromFields(fields: Fields): string {
  const values = fields.filter(([name]) => sameName(name, APPLICATION_HEADER));
  if (values.length > 1) {
    throw ApiError.badRequest(
      `the form field ${APPLICATION_HEADER} is given ${values.length} times; give it once.`,
    );
  }
  return checkApplicationName(values[0]?.[1].trim(), `The form field ${APPLICATION_HEADER}`);
}

/**
 * Job meta from `X-SVC-Meta-*` form fields (SPEC §3.1 rules; type A names keep their case).
 * A field left empty is not a parameter: a form sends its empty inputs (an unused rScript box,
 * a meta row without a value) and they must not count.
 */
export function metaFromFields(fields: Fields): JobMeta {
  return parseMetaFields(fields.filter(([, value]) => value.trim() !== ''));
}

/**
 * The job's callback URL from the form field `X-SVC-Callback-Url` (any case), unchecked; null
 * when the form has none or leaves it empty. Given twice: 400.
 */
export function callbackUrlFromFields(fields: Fields): string | null {
  const values = fields
    .filter(([name, value]) => sameName(name, CALLBACK_URL_HEADER) && value.trim() !== '')
    .map(([, value]) => value);
  if (values.length > 1) {
    throw ApiError.badRequest(
      `the form field ${CALLBACK_URL_HEADER} is given ${values.length} times; give it once.`,
    );
  }
  return values[0] ?? null;
}

/** The priority the form asks for in the field `X-SVC-Priority` (any case); empty: none. */
export function priorityFromFields(fields: Fields): number | undefined {
  return parsePriority(
    fields.filter(([name]) => sameName(name, PRIORITY_HEADER)).map(([, value]) => value),
    `the form field ${PRIORITY_HEADER}`,
  );
}

export function isJobFileField(field: string): boolean {
  return JOB_FILE_FIELDS.test(field);
}

/** The plain file name of an upload: some browsers send a client path (`C:\fakepath\data.csv`). */
export function plainFileName(originalName: string): string {
  return originalName.split(/[\\/]/).pop() ?? '';
}
