import { ApiError } from './api-error';

/**
 * The REST API's answers for a job or result that is not there, and for an id that cannot name
 * one, worded once: the controllers answer them, and AccessGuard answers the same for a
 * resource the caller may not see, so that a refusal cannot be told from an absence.
 */
export const missing = {
  job: (application: string, jobId: string): ApiError =>
    ApiError.notFound(`Application ${application} has no job ${jobId}.`),
  result: (application: string, jobId: string): ApiError =>
    ApiError.notFound(`No result for job ${jobId} of application ${application}.`),
  /** A result asked for before it may exist. */
  pendingResult: (application: string, jobId: string): ApiError =>
    ApiError.notFound(
      `No result for job ${jobId} of application ${application} (not ready, or unknown).`,
    ),
  resultData: (path: string): ApiError => ApiError.notFound(`No result data at ${path}.`),
  results: (application: string): ApiError =>
    ApiError.notFound(`No results for application ${application}.`),
};

export const malformed = {
  jobId: (value: string): ApiError =>
    ApiError.badRequest(`"${value.slice(0, 80)}" is not a job id (a UUID).`),
  resultFile: (file: string): ApiError =>
    ApiError.badRequest(`"${file.slice(0, 80)}" is not {jobId}.{extension}.`),
};
