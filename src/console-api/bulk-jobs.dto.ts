import { applyDecorators } from '@nestjs/common';
import { ValidateIf } from 'class-validator';
import { JsonObject, Satisfies, unknownFields, WholeSatisfies } from '../common/dto-validation';

/** The job filter's fields a bulk action's body may carry (the job list's query's). */
const FILTER_FIELDS = ['id', 'application', 'kind', 'source', 'principal', 'from', 'to'];
const CANCEL_FIELDS = [...FILTER_FIELDS, 'state', 'limit'];
const RETRY_FIELDS = [...FILTER_FIELDS, 'limit', 'dryRun'];
export const BULK_MAX_LIMIT = 1000;
export const BULK_DEFAULT_LIMIT = 100;

/** An optional field that must be a string when given (its reader in job-filter.ts checks the rest). */
const optionalText = (name: string): PropertyDecorator =>
  applyDecorators(
    ValidateIf((dto: Record<string, unknown>) => dto[name] !== undefined),
    Satisfies((value) =>
      typeof value === 'string' ? undefined : `${name}: must be a string when given`,
    ),
  );

/** The first field of a body that `known` does not name, as the 400 says it. */
const onlyFields =
  (known: string[]) =>
  (body: Record<string, unknown>): string | undefined => {
    const [unknown] = unknownFields(body, known);
    return unknown === undefined
      ? undefined
      : `${unknown.slice(0, 64)}: unknown field (known: ${known.join(', ')})`;
  };

/**
 * The job filter's fields as strings, each read by the same readers as the job list's query
 * (job-filter.ts), and `limit`: what every bulk action's body has. Each action's class says which
 * fields it knows (a class-level check would be inherited).
 */
abstract class BulkJobsDto {
  @optionalText('id') id?: string;

  @optionalText('application') application?: string;

  @optionalText('kind') kind?: string;

  @optionalText('source') source?: string;

  @optionalText('principal') principal?: string;

  @optionalText('from') from?: string;

  @optionalText('to') to?: string;

  @ValidateIf((dto: BulkJobsDto) => dto.limit !== undefined)
  @Satisfies((value) =>
    Number.isInteger(value) && (value as number) >= 1 && (value as number) <= BULK_MAX_LIMIT
      ? undefined
      : `limit: must be a whole number from 1 to ${BULK_MAX_LIMIT}`,
  )
  limit?: number;
}

/** A bulk cancel's body (POST /admin/jobs/cancel): the filter, `state` among them. */
@JsonObject('The body must be a JSON object, e.g. {"application": "app1", "state": "QUEUED"}.')
@WholeSatisfies(onlyFields(CANCEL_FIELDS))
export class CancelJobsDto extends BulkJobsDto {
  @optionalText('state') state?: string;
}

/**
 * A bulk retry's body (POST /admin/jobs/retry): the filter of the failed jobs to retry (no
 * `state`: always FAILED), and `dryRun`: count them only, for the confirmation.
 */
@JsonObject('The body must be a JSON object, e.g. {"application": "app1", "dryRun": true}.')
@WholeSatisfies(onlyFields(RETRY_FIELDS))
export class RetryJobsDto extends BulkJobsDto {
  @ValidateIf((dto: RetryJobsDto) => dto.dryRun !== undefined)
  @Satisfies((value) =>
    typeof value === 'boolean' ? undefined : 'dryRun: must be true or false when given',
  )
  dryRun?: boolean;
}
