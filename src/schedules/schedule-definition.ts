import { ApiError } from '../common/api-error';
import { isEmailAddress } from '../config/mail-settings';
import { parseMetaParameters } from '../job-core/job-meta';
import type { FunctionCallKind } from '../job-core/function-call-result';
import { cronOf } from './schedule-plan';
import { CatchUp, ScheduleEmail } from './schedule.entity';

/** Meta parameters every scheduled job gets (docs/api.md#schedules); a schedule may not set them. */
export const SCHEDULE_ID_META = 'scheduleId';
export const SCHEDULE_PLANNED_TIME_META = 'schedulePlannedTime';
const RESERVED_META = new Set([
  SCHEDULE_ID_META,
  SCHEDULE_PLANNED_TIME_META,
  'rScript',
  'sweaveFile',
]);

const MAX_NAME_LENGTH = 200;
const MAX_CRON_LENGTH = 200;
const MAX_TIME_ZONE_LENGTH = 64;
const MAX_SCRIPT_NAME_LENGTH = 255;
const MAX_META_PARAMETERS = 200;
/** Recipients of a schedule's e-mail (to and cc together): a team, not a mailing list. */
export const MAX_EMAIL_RECIPIENTS = 10;
const MAX_SUBJECT_LENGTH = 200;
// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

/** A scheduled job: a catalog script with meta parameters, or a function call with its payload. */
export type ScheduledJob =
  | { kind: 'script'; rScript: string; meta: Record<string, string> }
  | { kind: FunctionCallKind; payload: string };

/** A schedule as a client defines it (POST and PUT bodies), checked. */
export interface ScheduleDefinition {
  name: string;
  cron: string;
  timeZone: string;
  job: ScheduledJob;
  catchUp: CatchUp;
  callbackUrl: string | null;
  /** Where each run's result is sent by e-mail; null: not by e-mail. */
  email: ScheduleEmail | null;
  paused: boolean;
}

const FIELDS = new Set([
  'application',
  'name',
  'cron',
  'timeZone',
  'job',
  'catchUp',
  'callbackUrl',
  'email',
  'paused',
]);
const EMAIL_FIELDS = new Set(['to', 'cc', 'subject']);

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function text(body: Record<string, unknown>, field: string, maxLength: number): string {
  const value = body[field];
  if (typeof value !== 'string' || value.trim() === '') {
    throw ApiError.badRequest(`${field} is required: a non-empty string.`);
  }
  if (value.length > maxLength || CONTROL_CHARACTERS.test(value)) {
    throw ApiError.badRequest(
      `${field} must have at most ${maxLength} characters and no control characters.`,
    );
  }
  return value.trim();
}

function scheduledJob(value: unknown): ScheduledJob {
  if (!isObject(value)) {
    throw ApiError.badRequest(
      'job is required: {"rScript": "<catalog script>", "meta": {...}} or ' +
        '{"functionCall": "json" | "xml", "payload": "<text>"}.',
    );
  }
  if ('rScript' in value && 'functionCall' in value) {
    throw ApiError.badRequest('job has either rScript or functionCall, not both.');
  }
  if ('functionCall' in value) {
    const extra = Object.keys(value).filter((key) => key !== 'functionCall' && key !== 'payload');
    if (extra.length > 0) {
      throw ApiError.badRequest(`job has unknown fields for a function call: ${extra.join(', ')}.`);
    }
    if (value.functionCall !== 'json' && value.functionCall !== 'xml') {
      throw ApiError.badRequest('job.functionCall must be "json" or "xml".');
    }
    if (typeof value.payload !== 'string' || value.payload === '') {
      throw ApiError.badRequest("job.payload is required: the function call's payload as text.");
    }
    return { kind: value.functionCall, payload: value.payload };
  }
  const extra = Object.keys(value).filter((key) => key !== 'rScript' && key !== 'meta');
  if (extra.length > 0) {
    throw ApiError.badRequest(`job has unknown fields: ${extra.join(', ')}.`);
  }
  const rScript = text({ 'job.rScript': value.rScript }, 'job.rScript', MAX_SCRIPT_NAME_LENGTH);
  if (/[/\\]/.test(rScript) || rScript.includes('..')) {
    throw ApiError.badRequest(`job.rScript "${rScript}" is not a plain catalog file name.`);
  }
  return { kind: 'script', rScript, meta: metaOf(value.meta) };
}

function metaOf(value: unknown): Record<string, string> {
  if (value === undefined || value === null) {
    return {};
  }
  if (!isObject(value)) {
    throw ApiError.badRequest('job.meta must be an object of names and string values.');
  }
  const entries = Object.entries(value);
  if (entries.length > MAX_META_PARAMETERS) {
    throw ApiError.badRequest(`job.meta has more than ${MAX_META_PARAMETERS} parameters.`);
  }
  const parameters = entries.map(([name, parameter]) => {
    if (typeof parameter !== 'string') {
      throw ApiError.badRequest(`job.meta "${name.slice(0, 80)}" must be a string.`);
    }
    if (RESERVED_META.has(name)) {
      throw ApiError.badRequest(
        `job.meta "${name}" is set by the schedule itself; choose another name.`,
      );
    }
    return { name, value: parameter };
  });
  // The same rules as meta of any other job (names, control characters, well-known names).
  const meta = parseMetaParameters(parameters);
  const reserved = Object.keys(meta).find((name) => RESERVED_META.has(name));
  if (reserved !== undefined) {
    throw ApiError.badRequest(`job.meta "${reserved}" is set by the schedule itself.`);
  }
  return meta;
}

function addresses(value: unknown, field: string, required: boolean): string[] {
  if (value === undefined || value === null) {
    if (required) {
      throw ApiError.badRequest(`${field} is required: a list of e-mail addresses.`);
    }
    return [];
  }
  const list = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(list) || (required && list.length === 0)) {
    throw ApiError.badRequest(`${field} must be a non-empty list of e-mail addresses.`);
  }
  return list.map((address: unknown, index) => {
    if (typeof address !== 'string' || !isEmailAddress(address.trim())) {
      throw ApiError.badRequest(
        `${field}[${index}] ${JSON.stringify(address)?.slice(0, 80) ?? ''} is not an e-mail address such as jobs@example.com.`,
      );
    }
    return address.trim();
  });
}

/** A schedule's `email`: to (one or more), cc, subject; recipients bounded, addresses plain. */
function emailOf(value: unknown, scheduleName: string): ScheduleEmail | null {
  if (value === undefined || value === null) {
    return null;
  }
  if (!isObject(value)) {
    throw ApiError.badRequest(
      'email must be an object such as {"to": ["a@example.com"], "cc": [], "subject": "..."} or null.',
    );
  }
  const unknown = Object.keys(value).filter((key) => !EMAIL_FIELDS.has(key));
  if (unknown.length > 0) {
    throw ApiError.badRequest(
      `email has unknown fields: ${unknown.map((key) => key.slice(0, 40)).join(', ')} (known: to, cc, subject).`,
    );
  }
  const to = addresses(value.to, 'email.to', true);
  const cc = addresses(value.cc, 'email.cc', false);
  if (to.length + cc.length > MAX_EMAIL_RECIPIENTS) {
    throw ApiError.badRequest(
      `email.to and email.cc have ${to.length + cc.length} addresses; at most ${MAX_EMAIL_RECIPIENTS} are allowed.`,
    );
  }
  const subject =
    value.subject === undefined || value.subject === null
      ? `Result of schedule ${scheduleName}`.slice(0, MAX_SUBJECT_LENGTH)
      : text({ 'email.subject': value.subject }, 'email.subject', MAX_SUBJECT_LENGTH);
  return { to, cc, subject };
}

/**
 * Reads a POST or PUT body (JSON already parsed) for `applicationName`: every field checked,
 * unknown fields refused, the cron expression and time zone parsed. 400s name the field.
 */
export function readScheduleDefinition(body: unknown, applicationName: string): ScheduleDefinition {
  if (!isObject(body)) {
    throw ApiError.badRequest('The body must be a JSON object describing the schedule.');
  }
  const unknown = Object.keys(body).filter((key) => !FIELDS.has(key));
  if (unknown.length > 0) {
    throw ApiError.badRequest(
      `Unknown fields: ${unknown.map((key) => key.slice(0, 40)).join(', ')}.`,
    );
  }
  if (body.application !== undefined && body.application !== applicationName) {
    throw ApiError.badRequest(
      `application ${JSON.stringify(body.application).slice(0, 80)} differs from the X-SVC-Application-Name header (${applicationName}).`,
    );
  }
  const name = text(body, 'name', MAX_NAME_LENGTH);
  const cron = text(body, 'cron', MAX_CRON_LENGTH);
  const timeZone =
    body.timeZone === undefined ? 'UTC' : text(body, 'timeZone', MAX_TIME_ZONE_LENGTH);
  cronOf(cron, timeZone);
  const catchUp = body.catchUp ?? CatchUp.RUN_ONCE;
  if (catchUp !== CatchUp.RUN_ONCE && catchUp !== CatchUp.SKIP) {
    throw ApiError.badRequest('catchUp must be "runOnce" or "skip".');
  }
  const callbackUrl = body.callbackUrl ?? null;
  if (callbackUrl !== null && typeof callbackUrl !== 'string') {
    throw ApiError.badRequest('callbackUrl must be a string (an http or https URL) or null.');
  }
  const paused = body.paused ?? false;
  if (typeof paused !== 'boolean') {
    throw ApiError.badRequest('paused must be true or false.');
  }
  const email = emailOf(body.email, name);
  return {
    name,
    cron,
    timeZone,
    job: scheduledJob(body.job),
    catchUp,
    callbackUrl,
    email,
    paused,
  };
}
