import { ValidateIf } from 'class-validator';
import { JsonObject, Satisfies, unknownFields, WholeSatisfies } from '../common/dto-validation';

const FIELDS = ['application', 'state', 'kind', 'source', 'principal', 'from', 'to', 'limit'];
export const CANCEL_MAX_LIMIT = 1000;
export const CANCEL_DEFAULT_LIMIT = 100;

const text = (name: string) =>
  Satisfies((value) =>
    typeof value === 'string' ? undefined : `${name}: must be a string when given`,
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
  @ValidateIf((dto: CancelJobsDto) => dto.application !== undefined)
  @text('application')
  application?: string;

  @ValidateIf((dto: CancelJobsDto) => dto.state !== undefined)
  @text('state')
  state?: string;

  @ValidateIf((dto: CancelJobsDto) => dto.kind !== undefined)
  @text('kind')
  kind?: string;

  @ValidateIf((dto: CancelJobsDto) => dto.source !== undefined)
  @text('source')
  source?: string;

  @ValidateIf((dto: CancelJobsDto) => dto.principal !== undefined)
  @text('principal')
  principal?: string;

  @ValidateIf((dto: CancelJobsDto) => dto.from !== undefined)
  @text('from')
  from?: string;

  @ValidateIf((dto: CancelJobsDto) => dto.to !== undefined)
  @text('to')
  to?: string;

  @ValidateIf((dto: CancelJobsDto) => dto.limit !== undefined)
  @Satisfies((value) =>
    Number.isInteger(value) && (value as number) >= 1 && (value as number) <= CANCEL_MAX_LIMIT
      ? undefined
      : `limit: must be a whole number from 1 to ${CANCEL_MAX_LIMIT}`,
  )
  limit?: number;
}
