import { AsyncResource } from 'node:async_hooks';
import type { Request, Response } from 'express';
import { maskedQuery } from '../common/log-redaction';

/** The application of a REST path: `/svc/api/rest/{jobs|results|result}/{app}/...`. */
const APPLICATION_IN_PATH = /^\/svc\/api\/rest\/(?:jobs|results|result)\/(\w{1,64})(?:\/|$)/;

/**
 * The status of a request whose client closed the connection before the answer was complete
 * (nginx's "client closed request"): what Express holds then is its default (200) or an answer
 * the client never got whole.
 */
export const CLIENT_CLOSED_STATUS = 499;

/** One access log line's fields (the request id comes from the log context). */
export interface AccessLogFields {
  msg: string;
  method: string;
  path: string;
  /** The answer's status; CLIENT_CLOSED_STATUS when the client closed the connection first. */
  status: number;
  /** With `aborted`: the status of an answer already begun (its headers were sent). */
  sentStatus?: number;
  /** Bytes sent on the connection for this answer, headers included. */
  bytes: number;
  durationMs: number;
  application?: string;
  /** The client closed the connection before the answer was complete. */
  aborted?: true;
}

/** The request's path and query, with the values of credential-like parameters masked. */
export function maskedPath(originalUrl: string): string {
  const question = originalUrl.indexOf('?');
  return question < 0
    ? originalUrl
    : `${originalUrl.slice(0, question)}?${maskedQuery(originalUrl.slice(question + 1))}`;
}

/**
 * Starts the access log of one request: `write` gets its line once, when the answer is sent or
 * the connection closes first.
 */
export function followRequest(
  req: Request,
  res: Response,
  write: (fields: AccessLogFields) => void,
): void {
  const started = process.hrtime.bigint();
  const bytesBefore = req.socket.bytesWritten;
  let written = false;
  // Bound to the request's context: a connection closed by the client is reported from the
  // socket's, and the line would lose the request id.
  const done = AsyncResource.bind((): void => {
    if (written) {
      return;
    }
    written = true;
    const header = req.headers['x-svc-application-name'];
    const application =
      (typeof header === 'string' && /^\w{1,64}$/.test(header) ? header : undefined) ??
      APPLICATION_IN_PATH.exec(req.path)?.[1];
    const path = maskedPath(req.originalUrl);
    const aborted = !res.writableFinished;
    const status = aborted ? CLIENT_CLOSED_STATUS : res.statusCode;
    const fields: AccessLogFields = {
      msg: `${req.method} ${path} ${status}${aborted ? ' (client closed the connection)' : ''}`,
      method: req.method,
      path,
      status,
      bytes: req.socket.bytesWritten - bytesBefore,
      durationMs: Math.round(Number(process.hrtime.bigint() - started) / 1e4) / 100,
    };
    if (application !== undefined) {
      fields.application = application;
    }
    if (aborted) {
      fields.aborted = true;
      if (res.headersSent) {
        fields.sentStatus = res.statusCode;
      }
    }
    write(fields);
  });
  res.once('finish', done);
  res.once('close', done);
}
