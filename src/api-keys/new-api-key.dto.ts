import { ArrayMaxSize, IsArray, IsOptional, Matches, ValidateIf } from 'class-validator';
import { JsonObject, Satisfies, unknownFields, WholeSatisfies } from '../common/dto-validation';

/** The same rule as configured users and key principals: no spaces, no ":". */
const NAME = /^[^\s:]{1,128}$/;
const MAX_ROLES = 100;
const FIELDS = ['principal', 'roles', 'expiresAt'];
/** An ISO 8601 time with a date and a zone, e.g. 2027-01-31T00:00:00Z. */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;
const ROLES_MESSAGE = `roles: must be a list of at most ${MAX_ROLES} names without spaces or ":" (1 to 128 characters)`;

/** Date rolls 2027-02-31 over into March: the day must exist in its month. */
function isCalendarDate(time: string): boolean {
  const [year, month, day] = time.slice(0, 10).split('-').map(Number);
  return (
    month >= 1 && month <= 12 && day >= 1 && day <= new Date(Date.UTC(year, month, 0)).getUTCDate()
  );
}

function expiryProblem(value: unknown): string | undefined {
  if (
    typeof value !== 'string' ||
    !ISO_TIME.test(value) ||
    !isCalendarDate(value) ||
    Number.isNaN(new Date(value).getTime())
  ) {
    return 'expiresAt: must be a time in ISO 8601 with a zone, e.g. 2027-01-31T00:00:00Z';
  }
  return new Date(value).getTime() <= Date.now() ? 'expiresAt: must be in the future' : undefined;
}

/** A create request (admin API's POST body, `svc keys create`): 400 naming the field. */
@JsonObject('The body must be a JSON object: {"principal": …, "roles": […]}.')
@WholeSatisfies((body) => {
  const [unknown] = unknownFields(body, FIELDS);
  return unknown === undefined
    ? undefined
    : `${unknown.slice(0, 64)}: unknown field (known: ${FIELDS.join(', ')})`;
})
export class NewApiKeyDto {
  @Satisfies((value) =>
    typeof value === 'string' && NAME.test(value)
      ? undefined
      : 'principal: must be a name of 1 to 128 characters without spaces or ":"',
  )
  principal!: string;

  /** Absent: none; null is not a list. */
  @ValidateIf((dto: NewApiKeyDto) => dto.roles !== undefined)
  @IsArray({ message: ROLES_MESSAGE })
  @ArrayMaxSize(MAX_ROLES, { message: ROLES_MESSAGE })
  @Matches(NAME, { each: true, message: ROLES_MESSAGE })
  roles?: string[];

  /** Absent or null: the key never expires. */
  @IsOptional()
  @Satisfies(expiryProblem)
  expiresAt?: string | null;
}
