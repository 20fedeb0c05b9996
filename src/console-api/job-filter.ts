import { ApiError } from '../common/api-error';
import { checkApplicationName } from '../common/application-name';
import { choiceParameter, textParameter, timeParameter } from '../common/query-parameters';
import { CONSOLE_STATES, ConsoleState, JobPosition } from '../queue/job-admin.repository';
import { JobSource, R_JOB_KINDS, type JobKind } from '../queue/queue.types';

/** The front ends a user's job can come from (delivery jobs never show). */
const SOURCES: readonly JobSource[] = [
  JobSource.REST,
  JobSource.FORM,
  JobSource.SOAP,
  JobSource.DIRECTORY,
  JobSource.EMAIL,
  JobSource.SCHEDULE,
];

/** `<kind>:<name>`, as jobs record who submitted them. */
const PRINCIPAL = /^[a-z]+:\S+$/;

/** A job id or its first hex digits, dashes where the id has them or none. */
const ID_PREFIX = /^[0-9a-f]{1,32}$/;

/**
 * The ids a job id or its prefix stands for, as the first and the last id with those digits:
 * a range on the primary key's index, not a pattern over every id.
 */
export function idRangeOf(value: string): { from: string; to: string } {
  const digits = value.toLowerCase().replace(/-/g, '');
  if (!ID_PREFIX.test(digits)) {
    throw ApiError.badRequest(
      'id must be a job id or its first hex digits (1 to 32), e.g. 5b1e0c52.',
    );
  }
  const uuid = (hex: string): string =>
    `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  return { from: uuid(digits.padEnd(32, '0')), to: uuid(digits.padEnd(32, 'f')) };
}

/** What a caller asks for: the filter's fields before the caller's applications narrow it. */
export interface RequestedJobs {
  /** One application, or null: every application the caller may see. */
  application: string | null;
  states: ConsoleState[];
  kind: JobKind | null;
  source: JobSource | null;
  principal: string | null;
  from: Date | null;
  to: Date | null;
  /** The ids of `id`, a job id or its prefix; null: any. */
  idRange: { from: string; to: string } | null;
}

/**
 * The job filter's fields from a query string or a bulk cancel's body (`fields`: the raw values),
 * each checked with the 400 that names it. `states`: those this request accepts.
 */
export function requestedJobs(
  fields: Record<string, unknown>,
  states: readonly ConsoleState[] = CONSOLE_STATES,
): RequestedJobs {
  const application = textParameter(fields.application, 'application');
  const state = textParameter(fields.state, 'state');
  const principal = textParameter(fields.principal, 'principal');
  const id = textParameter(fields.id, 'id');
  if (principal !== null && !PRINCIPAL.test(principal)) {
    throw ApiError.badRequest('principal must be <kind>:<name>, e.g. user:alice.');
  }
  const requested: RequestedJobs = {
    application:
      application === null ? null : checkApplicationName(application, 'The application parameter'),
    states:
      state === null
        ? []
        : [...new Set(state.split(',').map((each) => choiceParameter(each, 'state', states)!))],
    kind: choiceParameter(textParameter(fields.kind, 'kind') ?? undefined, 'kind', R_JOB_KINDS),
    source: choiceParameter(textParameter(fields.source, 'source') ?? undefined, 'source', SOURCES),
    principal,
    from: timeParameter(fields.from, 'from'),
    to: timeParameter(fields.to, 'to'),
    idRange: id === null ? null : idRangeOf(id),
  };
  if (requested.from !== null && requested.to !== null && requested.from >= requested.to) {
    throw ApiError.badRequest('from must be before to.');
  }
  return requested;
}

/** A page's position as the opaque cursor of the next page's link. */
export function cursorOf(position: JobPosition): string {
  return Buffer.from(`${position.at}|${position.id}`, 'utf8').toString('base64url');
}

const POSITION =
  /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z)\|([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;

/** The position a cursor names; null when absent; 400 for one this service did not give. */
export function positionOf(value: unknown): JobPosition | null {
  const cursor = textParameter(value, 'cursor');
  if (cursor === null) {
    return null;
  }
  const match = POSITION.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  // A time as this service writes it: one the calendar has (no 30 February, no 24:00).
  const time = match === null ? NaN : Date.parse(match[1]);
  if (
    match === null ||
    Number.isNaN(time) ||
    new Date(time).toISOString().slice(0, 19) !== match[1].slice(0, 19)
  ) {
    throw ApiError.badRequest(
      'cursor must be the value of next from the previous page, as it was given.',
    );
  }
  return { at: match[1], id: match[2] };
}
