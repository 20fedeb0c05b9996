import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { Response } from 'express';
import { ApiError } from './api-error';

/**
 * The query parameters of the API's GET requests, read one way: each reader takes the raw value
 * Express parsed (a string, or an array or object when the parameter was repeated or bracketed),
 * answers null or its default when it is absent, and throws the 400 that names it otherwise.
 */

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

/** A text given once, at most 256 characters; null when absent or empty. */
export function textParameter(value: unknown, name: string): string | null {
  if (value === undefined || value === '') {
    return null;
  }
  if (typeof value !== 'string' || value.length > 256) {
    throw ApiError.badRequest(`${name} must be given once, at most 256 characters.`);
  }
  return value;
}

/** One of `choices`; null when absent. */
export function choiceParameter<T extends string>(
  value: unknown,
  name: string,
  choices: readonly T[],
): T | null {
  if (value === undefined) {
    return null;
  }
  if (!(choices as readonly unknown[]).includes(value)) {
    throw ApiError.badRequest(`${name} must be one of ${choices.join(', ')}.`);
  }
  return value as T;
}

/** A time in ISO 8601 with a zone; null when absent or empty. */
export function timeParameter(value: unknown, name: string): Date | null {
  if (value === undefined || value === '') {
    return null;
  }
  if (typeof value !== 'string' || !ISO_TIME.test(value) || Number.isNaN(Date.parse(value))) {
    throw ApiError.badRequest(
      `${name} must be a time in ISO 8601 with a zone, e.g. 2026-11-01T00:00:00Z.`,
    );
  }
  return new Date(value);
}

/** A whole number from `min` to `max`; `fallback` when absent or empty. */
export function wholeNumber(
  value: unknown,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
  if (value === undefined || value === '') {
    return fallback;
  }
  const number = typeof value === 'string' && /^\d{1,7}$/.test(value) ? Number(value) : NaN;
  if (!(number >= min && number <= max)) {
    throw ApiError.badRequest(`${name} must be a whole number from ${min} to ${max}.`);
  }
  return number;
}

/** A page's `limit` or `offset` of a listing: a non-negative whole number; undefined when absent. */
export function pagingNumber(value: unknown, name: string): number | undefined {
  if (value === undefined) {
    return undefined;
  }
  // RegExp.test reads a repeated parameter as its values joined by commas, as it always has.
  if (!/^\d{1,9}$/.test(value as string)) {
    throw ApiError.badRequest(`${name} must be a non-negative whole number.`);
  }
  return Number(value);
}

const MONTH = /^(\d{4})-(0[1-9]|1[0-2])$/;

/**
 * A month, YYYY-MM, counted as year * 12 + month - 1; null when absent (a repeated parameter,
 * not a string, counts as absent).
 */
export function monthParameter(value: unknown, name: string): number | null {
  if (typeof value !== 'string') {
    return null;
  }
  const match = MONTH.exec(value);
  if (!match) {
    throw ApiError.badRequest(`${name} must be a month, YYYY-MM (got "${value.slice(0, 40)}").`);
  }
  return Number(match[1]) * 12 + Number(match[2]) - 1;
}

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
