import { createHmac } from 'node:crypto';
import { Agent as HttpAgent, IncomingMessage, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { finished } from 'node:stream/promises';
import { Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { APPLICATION_HEADER } from '../common/application-name';
import { RestLinks } from '../common/public-uri';
import { renderRepresentation } from '../common/representation/rest-representation';
import { ApplicationsConfig, CallbackConfig } from '../config/config-slices';
import { applicationSettingsOf } from '../config/application-settings';
import { CallbackFailure, CallbackJobsRepository } from '../queue/callback-jobs.repository';
import { CallbackDelivery, ClaimedJob, DeliveryJobExecutor, JobKind } from '../queue/queue.types';
import { ResultRepresentation, resultView } from '../results/result-view';
import { CallbackRetryPolicy } from './callback-retry.policy';
import { CallbackDestination, CallbackUrlPolicy } from './callback-url.policy';
import { activeTraceCarrier, inSpan, SpanNotes, tracingEnabled } from '../tracing/tracing';

export const SIGNATURE_HEADER = 'X-SVC-Signature';
export const JOB_ID_HEADER = 'X-SVC-Job-Id';

/** Attempts one node runs at once (its callback slots); more due callbacks wait in the queue. */
export const CALLBACK_SLOTS = 16;

/** `sha256=<hex HMAC-SHA256 of body with secret>`: the X-SVC-Signature value. */
export function callbackSignature(secret: string, body: Buffer): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/** Why an attempt failed, for last_error: the message and the system's code where there is one. */
function failureText(error: unknown): string {
  const code = (error as { code?: unknown }).code;
  const message = error instanceof Error ? error.message : String(error);
  return typeof code === 'string' && !message.includes(code) ? `${message} (${code})` : message;
}

/** The W3C headers of the active span (the delivery's), when tracing is on. */
function traceHeaders(): Record<string, string> {
  const carrier = activeTraceCarrier();
  if (!carrier) {
    return {};
  }
  return carrier.tracestate
    ? { traceparent: carrier.traceparent, tracestate: carrier.tracestate }
    : { traceparent: carrier.traceparent };
}

/**
 * Runs callback jobs (kind `callback`) on worker nodes (docs/api.md#job-callbacks): POSTs the
 * job's result representation, signed with the application's callback secret, to the URL the
 * job named; a 2xx answer delivers it, anything else is tried again (CallbackRetryPolicy) until
 * the retry period ends, then the callback fails. The worker claims, leases and releases callback
 * jobs like any other (WorkerService, in slots of their own, through `claim`); this records each
 * attempt's outcome with the queue, if the worker still holds the lease.
 */
@Injectable()
export class CallbackJobExecutor implements DeliveryJobExecutor, OnModuleDestroy {
  readonly kind = JobKind.CALLBACK;
  private readonly logger = new Logger(CallbackJobExecutor.name);
  // Connections kept for the next attempt to the same host and port (each made to a checked
  // address: the pinned lookup runs when a connection is opened).
  private readonly httpAgent = new HttpAgent({ keepAlive: true });
  private readonly httpsAgent = new HttpsAgent({ keepAlive: true });

  constructor(
    private readonly config: CallbackConfig,
    private readonly applications: ApplicationsConfig,
    private readonly callbackJobs: CallbackJobsRepository,
    private readonly retryPolicy: CallbackRetryPolicy,
    private readonly urlPolicy: CallbackUrlPolicy,
  ) {}

  onModuleDestroy(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }

  /** Callback jobs one node delivers at once. */
  get capacity(): number {
    return CALLBACK_SLOTS;
  }

  /** Claims up to `limit` due callback jobs into `owner`'s callback slots (the worker's claim). */
  claim(owner: string, limit: number, leaseSeconds: number): Promise<ClaimedJob[]> {
    return this.callbackJobs.claim(owner, limit, leaseSeconds);
  }

  /**
   * One attempt of the callback job `job` leased by `owner`; `signal` aborts it (the node stops,
   * or lost the lease), and then nothing is recorded: the worker hands the job back uncounted.
   * Returns when it is to be tried again, or null when it ended (or was not recorded).
   */
  deliver(job: ClaimedJob, owner: string, signal: AbortSignal): Promise<Date | null> {
    const callback = job.callback;
    if (!callback) {
      throw new Error(`job ${job.id} is not a callback job`);
    }
    return tracingEnabled()
      ? this.tracedAttempt(job, callback, owner, signal)
      : this.attempt(job.id, callback, owner, signal);
  }

  /**
   * An attempt as a span of the job's trace; the POST carries the span's traceparent, so the
   * receiver's own spans join the trace too.
   */
  private tracedAttempt(
    job: ClaimedJob,
    callback: CallbackDelivery,
    owner: string,
    signal: AbortSignal,
  ): Promise<Date | null> {
    return inSpan(
      'svc.callback.deliver',
      {
        parent: job.trace,
        kind: 'client',
        attributes: {
          'svc.job.id': callback.jobId,
          'svc.application': callback.result.applicationName,
          'svc.callback.attempt': callback.attempts + 1,
          // The host only: a callback URL's path or query may hold the receiver's token.
          'server.address': new URL(callback.url).hostname,
        },
      },
      (span) => this.attempt(job.id, callback, owner, signal, span),
    );
  }

  private async attempt(
    callbackJobId: string,
    callback: CallbackDelivery,
    owner: string,
    signal: AbortSignal,
    span?: SpanNotes,
  ): Promise<Date | null> {
    const { jobId } = callback;
    const applicationName = callback.result.applicationName;
    try {
      const secret = applicationSettingsOf(this.applications, applicationName).callbackSecret;
      if (secret === null) {
        // The secret was removed after the job was submitted: an unsigned POST is never sent.
        await this.callbackJobs.end(callbackJobId, owner, {
          delivered: false,
          httpStatus: null,
          error: `application ${applicationName} has no callback secret`,
        });
        return null;
      }
      const body = Buffer.from(
        renderRepresentation(
          new ResultRepresentation(resultView(new RestLinks(callback.linksBase), callback.result)),
          // The shape receivers have read from the start: that of application/vnd.svc+json.
          'mapped-json',
        ),
        'utf8',
      );
      const destination = await this.destination(applicationName, callback.url);
      const outcome =
        'error' in destination
          ? destination
          : await this.post(
              destination,
              body,
              {
                'Content-Type': 'application/json; charset=utf-8',
                [SIGNATURE_HEADER]: callbackSignature(secret, body),
                [JOB_ID_HEADER]: jobId,
                [APPLICATION_HEADER]: applicationName,
                ...traceHeaders(),
              },
              signal,
            );
      if (outcome.httpStatus !== null) {
        span?.set({ 'http.response.status_code': outcome.httpStatus });
      }
      if (!outcome.ok) {
        span?.fail(outcome.httpStatus === null ? 'not delivered' : `HTTP ${outcome.httpStatus}`);
      }
      if (outcome.ok) {
        await this.callbackJobs.end(callbackJobId, owner, {
          delivered: true,
          httpStatus: outcome.httpStatus,
        });
        this.logger.log(`job ${jobId}: callback delivered (HTTP ${outcome.httpStatus})`);
        return null;
      }
      const failure: CallbackFailure = {
        delivered: false,
        httpStatus: outcome.httpStatus,
        error: outcome.error,
      };
      const attempts = callback.attempts + 1;
      const retryAt = this.retryPolicy.nextAttemptAt(callback.createdAt, attempts, new Date());
      if (retryAt === null) {
        await this.callbackJobs.end(callbackJobId, owner, failure);
        this.logger.warn(
          `job ${jobId}: callback failed after ${attempts} attempt(s), giving up: ${outcome.error}`,
        );
        return null;
      }
      await this.callbackJobs.retry(callbackJobId, owner, failure, retryAt);
      this.logger.log(
        `job ${jobId}: callback attempt ${attempts} failed (${outcome.error}); next at ${retryAt.toISOString()}`,
      );
      return retryAt;
    } catch (error) {
      if (error instanceof AttemptAborted) {
        return null;
      }
      // The database failed: the lease ends and the callback job is taken again.
      this.logger.warn(`job ${jobId}: callback attempt not recorded: ${(error as Error).message}`);
      return null;
    }
  }

  /**
   * Where to POST when the URL passes the submission rules again now, else the failed attempt:
   * the allow-list may have changed, and a name may now resolve to a private address.
   */
  private async destination(
    applicationName: string,
    url: string,
  ): Promise<CallbackDestination | { ok: false; httpStatus: null; error: string }> {
    try {
      return await this.urlPolicy.destination(applicationName, url);
    } catch (error) {
      return { ok: false, httpStatus: null, error: `not sent: ${(error as Error).message}` };
    }
  }

  /**
   * One POST to the checked destination, connected only to the addresses checked (its pinned
   * `lookup`; Host and TLS server name stay the URL's host). Throws AttemptAborted when `signal`
   * (the node stops, the lease was lost) cut it short.
   */
  private async post(
    destination: CallbackDestination,
    body: Buffer,
    headers: Record<string, string>,
    signal: AbortSignal,
  ): Promise<
    { ok: true; httpStatus: number } | { ok: false; httpStatus: number | null; error: string }
  > {
    const timeoutSeconds = this.config.callbackTimeoutSeconds;
    const deadline = AbortSignal.any([signal, AbortSignal.timeout(timeoutSeconds * 1000)]);
    const https = destination.url.protocol === 'https:';
    try {
      const response = await new Promise<IncomingMessage>((resolve, reject) => {
        const request = (https ? httpsRequest : httpRequest)(
          destination.url,
          {
            method: 'POST',
            headers: { ...headers, 'Content-Length': String(body.length) },
            agent: https ? this.httpsAgent : this.httpAgent,
            lookup: destination.lookup,
            signal: deadline,
          },
          resolve,
        );
        request.on('error', reject);
        request.end(body);
      });
      // No redirect is followed: it is an answer, not a new destination (the allow-list checked
      // this URL only). The body is read and dropped, never held, within the same deadline;
      // reading it lets the connection be reused.
      await finished(response.resume());
      const status = response.statusCode ?? 0;
      return status >= 200 && status < 300
        ? { ok: true, httpStatus: status }
        : { ok: false, httpStatus: status, error: `HTTP ${status}` };
    } catch (error) {
      if (signal.aborted) {
        throw new AttemptAborted();
      }
      if (deadline.aborted) {
        return { ok: false, httpStatus: null, error: `no answer within ${timeoutSeconds} s` };
      }
      return { ok: false, httpStatus: null, error: failureText(error) };
    }
  }
}

class AttemptAborted extends Error {
  constructor() {
    super('the attempt was cut short (the node stops, or lost the lease)');
    this.name = 'AttemptAborted';
  }
}
