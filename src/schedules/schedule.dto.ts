import { Type } from 'class-transformer';
import { IsBoolean, IsIn, IsOptional, IsString, ValidateIf, ValidateNested } from 'class-validator';
import {
  isJsonObject,
  JsonObject,
  Satisfies,
  unknownFields,
  WholeSatisfies,
} from '../common/dto-validation';
import { isEmailAddress } from '../config/mail-settings';
import { cronOf } from './schedule-plan';
import { CatchUp } from './schedule.entity';

/** Meta parameters every scheduled job gets (docs/api.md#schedules); a schedule may not set them. */
export const SCHEDULE_ID_META = 'scheduleId';
export const SCHEDULE_PLANNED_TIME_META = 'schedulePlannedTime';
export const RESERVED_META = new Set([
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
export const MAX_SUBJECT_LENGTH = 200;
// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

const FIELDS = [
  'application',
  'name',
  'cron',
  'timeZone',
  'job',
  'catchUp',
  'callbackUrl',
  'email',
  'paused',
];
const EMAIL_FIELDS = ['to', 'cc', 'subject'];

/** A required text field: not blank, bounded, no control characters (kept as sent, trimmed later). */
function text(field: string, maxLength: number) {
  return (value: unknown): string | undefined => {
    if (typeof value !== 'string' || value.trim() === '') {
      return `${field} is required: a non-empty string.`;
    }
    if (value.length > maxLength || CONTROL_CHARACTERS.test(value)) {
      return `${field} must have at most ${maxLength} characters and no control characters.`;
    }
    return undefined;
  };
}

/** An address or a list of them, each a plain address such as jobs@example.com. */
function addresses(field: string, required: boolean) {
  return (value: unknown): string | undefined => {
    if (value === undefined || value === null) {
      return required ? `${field} is required: a list of e-mail addresses.` : undefined;
    }
    const list = typeof value === 'string' ? [value] : value;
    if (!Array.isArray(list) || (required && list.length === 0)) {
      return `${field} must be a non-empty list of e-mail addresses.`;
    }
    const index = list.findIndex(
      (address: unknown) => typeof address !== 'string' || !isEmailAddress(address.trim()),
    );
    return index === -1
      ? undefined
      : `${field}[${index}] ${JSON.stringify(list[index])?.slice(0, 80) ?? ''} is not an e-mail address such as jobs@example.com.`;
  };
}

function countOf(addresses: unknown): number {
  return addresses === undefined || addresses === null
    ? 0
    : typeof addresses === 'string'
      ? 1
      : (addresses as unknown[]).length;
}

/** A schedule's `email`: to (one or more), cc, subject; recipients bounded, addresses plain. */
@WholeSatisfies((email) => {
  const unknown = unknownFields(email, EMAIL_FIELDS);
  return unknown.length === 0
    ? undefined
    : `email has unknown fields: ${unknown.map((key) => key.slice(0, 40)).join(', ')} (known: ${EMAIL_FIELDS.join(', ')}).`;
})
export class ScheduleEmailDto {
  @Satisfies(addresses('email.to', true))
  to!: string | string[];

  /** Checked with the number of recipients, which comes after both lists' addresses. */
  @Satisfies((cc, email) => {
    const problem = addresses('email.cc', false)(cc);
    if (problem !== undefined || addresses('email.to', true)(email.to) !== undefined) {
      return problem;
    }
    const count = countOf(email.to) + countOf(cc);
    return count > MAX_EMAIL_RECIPIENTS
      ? `email.to and email.cc have ${count} addresses; at most ${MAX_EMAIL_RECIPIENTS} are allowed.`
      : undefined;
  })
  cc?: string | string[] | null;

  /** Absent or null: "Result of schedule <name>". */
  @IsOptional()
  @Satisfies(text('email.subject', MAX_SUBJECT_LENGTH))
  subject?: string | null;
}

/** `job.meta`: names and string values; the job's own meta rules follow (`parseMetaParameters`). */
function metaProblem(value: unknown): string | undefined {
  if (value === undefined || value === null) {
    return undefined;
  }
  if (!isJsonObject(value)) {
    return 'job.meta must be an object of names and string values.';
  }
  const entries = Object.entries(value);
  if (entries.length > MAX_META_PARAMETERS) {
    return `job.meta has more than ${MAX_META_PARAMETERS} parameters.`;
  }
  for (const [name, parameter] of entries) {
    if (typeof parameter !== 'string') {
      return `job.meta "${name.slice(0, 80)}" must be a string.`;
    }
    if (RESERVED_META.has(name)) {
      return `job.meta "${name}" is set by the schedule itself; choose another name.`;
    }
  }
  return undefined;
}

/** A catalog script with meta parameters. */
@WholeSatisfies((job) => {
  const extra = unknownFields(job, ['rScript', 'meta']);
  return extra.length === 0 ? undefined : `job has unknown fields: ${extra.join(', ')}.`;
})
export class ScriptJobDto {
  @Satisfies((value) => {
    const problem = text('job.rScript', MAX_SCRIPT_NAME_LENGTH)(value);
    if (problem !== undefined) {
      return problem;
    }
    const rScript = (value as string).trim();
    return /[/\\]/.test(rScript) || rScript.includes('..')
      ? `job.rScript "${rScript}" is not a plain catalog file name.`
      : undefined;
  })
  rScript!: string;

  @Satisfies(metaProblem)
  meta?: Record<string, string> | null;
}

/** A call of the application's R functions with its payload. */
@WholeSatisfies((job) => {
  if ('rScript' in job) {
    return 'job has either rScript or functionCall, not both.';
  }
  const extra = unknownFields(job, ['functionCall', 'payload']);
  return extra.length === 0
    ? undefined
    : `job has unknown fields for a function call: ${extra.join(', ')}.`;
})
export class FunctionCallJobDto {
  @IsIn(['json', 'xml'], { message: 'job.functionCall must be "json" or "xml".' })
  functionCall!: 'json' | 'xml';

  @Satisfies((value) =>
    typeof value === 'string' && value !== ''
      ? undefined
      : "job.payload is required: the function call's payload as text.",
  )
  payload!: string;
}

/**
 * A schedule as a client defines it (POST and PUT bodies): every field checked in this order,
 * unknown fields first, the cron expression parsed in its time zone. What it names (application,
 * catalog script, callback host) is checked by the service.
 */
@JsonObject('The body must be a JSON object describing the schedule.')
@WholeSatisfies((body) => {
  const unknown = unknownFields(body, FIELDS);
  return unknown.length === 0
    ? undefined
    : `Unknown fields: ${unknown.map((key) => key.slice(0, 40)).join(', ')}.`;
})
export class ScheduleDto {
  /** Absent, or the X-SVC-Application-Name header's (the service compares). */
  application?: unknown;

  @Satisfies(text('name', MAX_NAME_LENGTH))
  name!: string;

  /** Parsed in its time zone here, where it stands among the checks (after timeZone's text). */
  @Satisfies((cron, schedule) => {
    const problem = text('cron', MAX_CRON_LENGTH)(cron);
    const zone = schedule.timeZone ?? 'UTC';
    if (problem !== undefined || text('timeZone', MAX_TIME_ZONE_LENGTH)(zone) !== undefined) {
      return problem;
    }
    try {
      cronOf((cron as string).trim(), (zone as string).trim());
      return undefined;
    } catch (error) {
      return (error as Error).message;
    }
  })
  cron!: string;

  /** Absent: UTC. */
  @ValidateIf((dto: ScheduleDto) => dto.timeZone !== undefined)
  @Satisfies(text('timeZone', MAX_TIME_ZONE_LENGTH))
  timeZone?: string;

  /** Absent or null: runOnce. */
  @IsOptional()
  @IsIn([CatchUp.RUN_ONCE, CatchUp.SKIP], { message: 'catchUp must be "runOnce" or "skip".' })
  catchUp?: CatchUp | null;

  @IsOptional()
  @IsString({ message: 'callbackUrl must be a string (an http or https URL) or null.' })
  callbackUrl?: string | null;

  /** Absent or null: not paused. */
  @IsOptional()
  @IsBoolean({ message: 'paused must be true or false.' })
  paused?: boolean | null;

  /** Absent or null: results are not sent by e-mail. */
  @IsOptional()
  @Satisfies((value) =>
    isJsonObject(value)
      ? undefined
      : 'email must be an object such as {"to": ["a@example.com"], "cc": [], "subject": "..."} or null.',
  )
  @ValidateNested()
  @Type(() => ScheduleEmailDto)
  email?: ScheduleEmailDto | null;

  @Satisfies((value) =>
    isJsonObject(value)
      ? undefined
      : 'job is required: {"rScript": "<catalog script>", "meta": {...}} or ' +
        '{"functionCall": "json" | "xml", "payload": "<text>"}.',
  )
  @ValidateNested()
  @Type((options) => {
    const job = (options?.object as Record<string, unknown> | undefined)?.job;
    return isJsonObject(job) && 'functionCall' in job ? FunctionCallJobDto : ScriptJobDto;
  })
  job!: ScriptJobDto | FunctionCallJobDto;
}
