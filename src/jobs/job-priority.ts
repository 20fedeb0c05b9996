import { ApiError } from '../common/api-error';

/** The header (REST) and the form field (upload page) that carry a job's priority. */
export const PRIORITY_HEADER = 'X-SVC-Priority';

/**
 * The priority a request asks for: one whole number (e.g. `5`, `-2`); none given: undefined.
 * Bounds are the application's (SubmissionLimits.priorityOf). Anything else is a 400.
 */
export function parsePriority(values: readonly string[], where: string): number | undefined {
  const given = values.map((value) => value.trim()).filter((value) => value !== '');
  if (given.length === 0) {
    return undefined;
  }
  if (given.length > 1) {
    throw ApiError.badRequest(`${where} is given ${given.length} times; give it once.`);
  }
  if (!/^[+-]?\d{1,6}$/.test(given[0])) {
    throw ApiError.badRequest(
      `${where} must be a whole number such as 5 or -2 (got "${given[0].slice(0, 40)}").`,
    );
  }
  return Number(given[0]);
}
