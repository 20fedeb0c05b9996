import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';

/** Fields added to every log line written while a request or a job is being handled. */
export interface LogContext {
  requestId?: string;
  jobId?: string;
}

/** The ids of the active span, added to log lines when tracing is on. */
export interface TraceLogFields {
  traceId: string;
  spanId: string;
}

const storage = new AsyncLocalStorage<LogContext>();

/** Set by the tracing SDK when tracing is on; null costs the log lines nothing. */
let traceFields: (() => TraceLogFields | undefined) | null = null;

export function setTraceLogFields(source: () => TraceLogFields | undefined): void {
  traceFields = source;
}

/** The fields of the request or job this code runs for (and its span's); `{}` outside of one. */
export function currentLogContext(): LogContext & Partial<TraceLogFields> {
  const fields = storage.getStore() ?? {};
  const trace = traceFields?.();
  return trace ? { ...fields, ...trace } : fields;
}

/**
 * Runs `fn` (and everything it starts) with `fields` as its log context. The context is
 * replaced, not merged: a job claimed while a request happens to be running is not that
 * request's.
 */
export function runWithLogContext<T>(fields: LogContext, fn: () => T): T {
  return storage.run(fields, fn);
}

export const REQUEST_ID_HEADER = 'X-Request-Id';
/** A caller's id is kept only when it is short and plain, so it cannot forge log fields. */
const ACCEPTABLE_REQUEST_ID = /^[\w.:@/+=-]{1,128}$/;

/**
 * Express middleware: takes the caller's X-Request-Id (or makes one), answers it in the same
 * header, and runs the rest of the request inside its log context.
 */
export function requestIdMiddleware(req: Request, res: Response, next: NextFunction): void {
  const incoming = req.headers['x-request-id'];
  const candidate = Array.isArray(incoming) ? incoming[0] : incoming;
  const requestId = candidate && ACCEPTABLE_REQUEST_ID.test(candidate) ? candidate : randomUUID();
  res.setHeader(REQUEST_ID_HEADER, requestId);
  runWithLogContext({ requestId }, next);
}
