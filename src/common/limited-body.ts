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

/** At most this much of a refused body is read and discarded before the answer goes out. */
export const REFUSED_BODY_DRAIN_BYTES = 8 * 1024 * 1024;
/** And for at most this long; a client sending slower than that gets the answer as it is. */
export const REFUSED_BODY_DRAIN_MS = 10_000;

/**
 * Calls `answer` once the rest of a refused request body has been read and thrown away, bounded
 * by REFUSED_BODY_DRAIN_BYTES and REFUSED_BODY_DRAIN_MS (then at once). An answer sent while the
 * client still sends, on a connection then closed, reaches most clients as a reset (`write
 * EPIPE` in Node's fetch, a network error in a browser) instead of the 413 and its message. A body
 * declared larger than the bound is not read at all: the answer goes out at once.
 */
export function afterRefusedBody(req: Request, answer: () => void): void {
  const declared = Number(req.headers['content-length']);
  if (
    req.complete ||
    req.destroyed ||
    (Number.isFinite(declared) && declared > REFUSED_BODY_DRAIN_BYTES)
  ) {
    answer();
    return;
  }
  let received = 0;
  let done = false;
  const finish = (): void => {
    if (!done) {
      done = true;
      clearTimeout(timer);
      req.off('data', onData).off('end', finish).off('close', finish).off('error', finish);
      answer();
    }
  };
  const onData = (chunk: Buffer): void => {
    received += chunk.length;
    if (received > REFUSED_BODY_DRAIN_BYTES) {
      finish();
    }
  };
  const timer = setTimeout(finish, REFUSED_BODY_DRAIN_MS);
  timer.unref();
  req.on('data', onData).on('end', finish).on('close', finish).on('error', finish);
  // A parser that stopped reading (raw-body) paused the request; multer's own drain keeps it flowing.
  req.unpipe();
  req.resume();
}
