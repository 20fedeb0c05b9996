import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { Response } from 'express';
import { ApiError } from './api-error';

/**
 * The `wait` query parameter of GET results and job status: how long the request may wait for
 * the answer to change, in seconds (1 to RESULT_WAIT_MAX_SECONDS); null when not asked.
 */
export function waitMilliseconds(value: unknown, maxSeconds: number): number | null {
  if (value === undefined) {
    return null;
  }
  if (typeof value !== 'string' || !/^\d{1,5}$/.test(value)) {
    throw ApiError.badRequest(`wait must be a whole number of seconds from 1 to ${maxSeconds}.`);
  }
  const seconds = Number(value);
  if (seconds < 1 || seconds > maxSeconds) {
    throw ApiError.badRequest(`wait must be a whole number of seconds from 1 to ${maxSeconds}.`);
  }
  return seconds * 1000;
}

/** Aborts when the client's connection closes before the answer was sent. */
export function clientGoneSignal(res: Response): AbortSignal {
  const gone = new AbortController();
  res.on('close', () => {
    if (!res.writableEnded) {
      gone.abort();
    }
  });
  return gone.signal;
}

/** A handler's parameter: `clientGoneSignal` of the request's response. */
export const ClientGone = createParamDecorator(
  (_data: unknown, context: ExecutionContext): AbortSignal =>
    clientGoneSignal(context.switchToHttp().getResponse<Response>()),
);
