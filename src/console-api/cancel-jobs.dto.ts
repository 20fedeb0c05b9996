import { applyDecorators } from '@nestjs/common';
import { ValidateIf } from 'class-validator';
import { JsonObject, Satisfies, unknownFields, WholeSatisfies } from '../common/dto-validation';

const FIELDS = ['id', 'application', 'state', 'kind', 'source', 'principal', 'from', 'to', 'limit'];
export const CANCEL_MAX_LIMIT = 1000;
export const CANCEL_DEFAULT_LIMIT = 100;

/** An optional field that must be a string when given (its reader in job-filter.ts checks the rest). */
const optionalText = (name: string): PropertyDecorator =>
  applyDecorators(
    ValidateIf((dto: Record<string, unknown>) => dto[name] !== undefined),
    Satisfies((value) =>
      typeof value === 'string' ? undefined : `${name}: must be a string when given`,
    ),
  );

/**
 * A bulk cancel's body (POST /admin/jobs/cancel): the job filter's fields as strings, each read
 * by the same readers as the job list's query (job-filter.ts), and `limit`.
 */
@JsonObject('The body must be a JSON object, e.g. {"application": "app1", "state": "QUEUED"}.')
@WholeSatisfies((body) => {
  const [unknown] = unknownFields(body, FIELDS);
  return unknown === undefined
    ? undefined
    : `${unknown.slice(0, 64)}: unknown field (known: ${FIELDS.join(', ')})`;
})
export class CancelJobsDto {
  @optionalText('id') id?: string;

  @optionalText('application') application?: string;

  @optionalText('state') state?: string;

  @optionalText('kind') kind?: string;

  @optionalText('source') source?: string;

  @optionalText('principal') principal?: string;

  @optionalText('from') from?: string;

  @optionalText('to') to?: string;

  @ValidateIf((dto: CancelJobsDto) => dto.limit !== undefined)
  @Satisfies((value) =>
    Number.isInteger(value) && (value as number) >= 1 && (value as number) <= CANCEL_MAX_LIMIT
      ? undefined
      : `limit: must be a whole number from 1 to ${CANCEL_MAX_LIMIT}`,
  )
  limit?: number;
}
