import { ApiError } from '../common/api-error';
import { parseMetaParameters } from '../job-core/job-meta';
import { rStringProblem } from '../common/r-values';
import type { FunctionCallKind } from '../job-core/function-call-result';
import { CatchUp, ScheduleEmail } from './schedule.entity';
import { MAX_SUBJECT_LENGTH, RESERVED_META, ScheduleDto, ScheduleEmailDto } from './schedule.dto';

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

/** The job's meta by the rules of any job's meta (names, control characters, well-known names). */
function metaOf(value: Record<string, string> | null | undefined): Record<string, string> {
  const parameters = Object.entries(value ?? {}).map(([name, parameter]) => ({
    name,
    value: parameter,
  }));
  const meta = parseMetaParameters(parameters);
  const reserved = Object.keys(meta).find((name) => RESERVED_META.has(name));
  if (reserved !== undefined) {
    throw ApiError.badRequest(`job.meta "${reserved}" is set by the schedule itself.`);
  }
  return meta;
}

function addressesOf(value: string | string[] | null | undefined): string[] {
  return (typeof value === 'string' ? [value] : (value ?? [])).map((address) => address.trim());
}

function emailOf(email: ScheduleEmailDto, scheduleName: string): ScheduleEmail {
  return {
    to: addressesOf(email.to),
    cc: addressesOf(email.cc),
    subject:
      email.subject === undefined || email.subject === null
        ? `Result of schedule ${scheduleName}`.slice(0, MAX_SUBJECT_LENGTH)
        : email.subject.trim(),
  };
}

/** The payload R will receive at every run: refused now when R cannot hold it (not at a tick). */
function payloadOf(payload: string): string {
  const problem = rStringProblem(payload);
  if (problem !== null) {
    throw ApiError.badRequest(`job.payload ${problem}.`);
  }
  return payload;
}

/**
 * A POST or PUT body (its shape checked by `ScheduleDto`) for `applicationName`: its application
 * compared with the header's, the job's meta read by the rules of any job's meta, defaults
 * filled in. 400s name the field.
 */
export function scheduleDefinitionOf(
  body: ScheduleDto,
  applicationName: string,
): ScheduleDefinition {
  if (body.application !== undefined && body.application !== applicationName) {
    throw ApiError.badRequest(
      `application ${JSON.stringify(body.application).slice(0, 80)} differs from the X-SVC-Application-Name header (${applicationName}).`,
    );
  }
  const name = body.name.trim();
  const cron = body.cron.trim();
  const timeZone = body.timeZone?.trim() ?? 'UTC';
  const { job } = body;
  return {
    name,
    cron,
    timeZone,
    job:
      'functionCall' in job
        ? { kind: job.functionCall, payload: payloadOf(job.payload) }
        : { kind: 'script', rScript: job.rScript.trim(), meta: metaOf(job.meta) },
    catchUp: body.catchUp ?? CatchUp.RUN_ONCE,
    callbackUrl: body.callbackUrl ?? null,
    email: body.email === undefined || body.email === null ? null : emailOf(body.email, name),
    paused: body.paused ?? false,
  };
}
