import type { Request } from 'express';
import { ApiError } from './api-error';
import { readLimitedBody } from './limited-body';
import { mediaTypeOf } from './media-type';

/** Admin requests carry small JSON documents; anything larger is not one. */
const JSON_BODY_LIMIT = 64 * 1024;

/** A request's JSON body: 415 for another type, 413 above 64 KiB, 400 when it does not parse. */
export async function readJsonBody(req: Request): Promise<unknown> {
  if (mediaTypeOf(req) !== 'application/json') {
    throw ApiError.unsupportedMediaType('The body must be JSON (Content-Type: application/json).');
  }
  const bytes = await readLimitedBody(
    req,
    JSON_BODY_LIMIT,
    'The JSON body may have at most 64 KiB.',
  );
  try {
    return JSON.parse(bytes.toString('utf8')) as unknown;
  } catch (error) {
    throw ApiError.badRequest(`The body is not JSON: ${(error as Error).message.slice(0, 200)}`);
  }
}
