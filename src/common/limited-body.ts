import type { Request } from 'express';
import getRawBody from 'raw-body';
import { ApiError } from './api-error';

/**
 * The request body as bytes, at most `limit` of them: 413 with `tooLarge` as the message when
 * Content-Length says more (before reading) or more arrives.
 */
export async function readLimitedBody(
  req: Request,
  limit: number,
  tooLarge: string,
): Promise<Buffer> {
  if (Number(req.headers['content-length'] ?? 0) > limit) {
    throw ApiError.payloadTooLarge(tooLarge);
  }
  return getRawBody(req, { limit }).catch((error: Error & { type?: string }) => {
    throw error.type === 'entity.too.large' ? ApiError.payloadTooLarge(tooLarge) : error;
  });
}
