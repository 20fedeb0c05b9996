import { createHmac } from 'node:crypto';
import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { APPLICATION_HEADER } from '../common/application-name';
import { RestLinks } from '../common/public-uri';
import { renderRepresentation } from '../common/representation/rest-representation';
import { ApplicationsConfig, CallbackConfig, QueueConfig } from '../config/config-slices';
import { applicationSettingsOf } from '../config/application-settings';
import { QueueNotifier } from '../queue/queue-notifier.service';
import { ResultRepresentation, resultView } from '../results/result-view';
import { CallbackRetryPolicy } from './callback-retry.policy';
import { CallbackUrlPolicy } from './callback-url.policy';
import { CallbackRepository, DueCallback } from './callback.repository';
import { activeTraceCarrier, inSpan, SpanNotes, tracingEnabled } from '../tracing/tracing';

export const SIGNATURE_HEADER = 'X-SVC-Signature';
export const JOB_ID_HEADER = 'X-SVC-Job-Id';

/** Attempts one node runs at once; more due callbacks wait for the next round. */
const MAX_IN_FLIGHT = 16;
/** How far past its time limit an attempt's claim lasts before another node may take it. */
const LEASE_MARGIN_SECONDS = 5;

/** `sha256=<hex HMAC-SHA256 of body with secret>`: the X-SVC-Signature value. */
export function callbackSignature(secret: string, body: Buffer): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/** Why an attempt failed, for last_error: the cause's code or message where fetch hides it. */
function failureText(error: unknown, timeoutSeconds: number): string {
  if (error instanceof Error && error.name === 'TimeoutError') {
    return `no answer within ${timeoutSeconds} s`;
  }
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  const detail = cause?.code ?? cause?.message;
  const message = error instanceof Error ? error.message : String(error);
  return detail ? `${message} (${detail})` : message;
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

class ShutdownAbort extends Error {
  constructor() {
    super('the node is shutting down');
    this.name = 'ShutdownAbort';
  }
}

/**
 * Delivers job callbacks from worker nodes (docs/api.md#job-callbacks): POSTs the job's result
 * representation, signed with the application's callback secret, to the URL the job named; a
 * 2xx answer delivers it, anything else is retried (CallbackRetryPolicy) until the retry period
 * ends. Woken by result-ready notifications, by its own retry timers and by polling, so
 * callbacks left pending by a stopped node are delivered when any worker runs again.
 */
@Injectable()
export class CallbackDeliveryService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(CallbackDeliveryService.name);
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly shutdown = new AbortController();
  private stopping = false;
  private claiming = false;
  private claimAgain = false;
  private readonly timers = new Set<NodeJS.Timeout>();
  private unsubscribe: (() => void) | null = null;

  constructor(
    private readonly config: CallbackConfig,
    private readonly queueConfig: QueueConfig,
    private readonly applications: ApplicationsConfig,
    private readonly callbacks: CallbackRepository,
    private readonly retryPolicy: CallbackRetryPolicy,
    private readonly urlPolicy: CallbackUrlPolicy,
    private readonly notifier: QueueNotifier,
  ) {}

  onApplicationBootstrap(): void {
    // A result stored with a callback queues it; the poll below finds those whose notice was lost.
    this.unsubscribe = this.notifier.onCallbackQueued(() => this.wake());
    const poll = setInterval(() => this.wake(), this.queueConfig.pollIntervalMs);
    poll.unref();
    this.timers.add(poll);
    this.wake();
  }

  /** Asks for a round of claims now; rounds never overlap, a request during one adds another. */
  wake(): void {
    if (this.stopping) {
      return;
    }
    if (this.claiming) {
      this.claimAgain = true;
      return;
    }
    void this.claimRounds();
  }

  private async claimRounds(): Promise<void> {
    this.claiming = true;
    try {
      do {
        this.claimAgain = false;
        const free = MAX_IN_FLIGHT - this.inFlight.size;
        if (free <= 0 || this.stopping) {
          break;
        }
        const due = await this.callbacks.claimDue(
          free,
          this.config.callbackTimeoutSeconds + LEASE_MARGIN_SECONDS,
        );
        for (const callback of due) {
          const attempt = (
            tracingEnabled() ? this.tracedAttempt(callback) : this.attempt(callback)
          ).finally(() => {
            this.inFlight.delete(callback.jobId);
            this.wake();
          });
          this.inFlight.set(callback.jobId, attempt);
        }
        if (due.length === free) {
          this.claimAgain = true;
        }
      } while (this.claimAgain && !this.stopping);
    } catch (error) {
      this.logger.warn(`claiming callbacks failed: ${(error as Error).message}`);
    } finally {
      this.claiming = false;
    }
  }

  /**
   * An attempt as a span of the job's trace; the POST carries the span's traceparent, so the
   * receiver's own spans join the trace too.
   */
  private tracedAttempt(callback: DueCallback): Promise<void> {
    return inSpan(
      'svc.callback.deliver',
      {
        parent: callback.trace,
        kind: 'client',
        attributes: {
          'svc.job.id': callback.jobId,
          'svc.application': callback.result.applicationName,
          'svc.callback.attempt': callback.attempts + 1,
          // The host only: a callback URL's path or query may hold the receiver's token.
          'server.address': new URL(callback.url).hostname,
        },
      },
      (span) => this.attempt(callback, span),
    );
  }

  private async attempt(callback: DueCallback, span?: SpanNotes): Promise<void> {
    const { jobId } = callback;
    const applicationName = callback.result.applicationName;
    try {
      const secret = applicationSettingsOf(this.applications, applicationName).callbackSecret;
      if (secret === null) {
        // The secret was removed after the job was submitted: an unsigned POST is never sent.
        await this.callbacks.recordFailure(
          jobId,
          { httpStatus: null, error: `application ${applicationName} has no callback secret` },
          null,
        );
        return;
      }
      const body = Buffer.from(
        renderRepresentation(
          new ResultRepresentation(resultView(new RestLinks(callback.linksBase), callback.result)),
          'json',
        ),
        'utf8',
      );
      const outcome =
        (await this.stillAllowed(applicationName, callback.url)) ??
        (await this.post(callback.url, body, {
          'Content-Type': 'application/json; charset=utf-8',
          [SIGNATURE_HEADER]: callbackSignature(secret, body),
          [JOB_ID_HEADER]: jobId,
          [APPLICATION_HEADER]: applicationName,
          ...traceHeaders(),
        }));
      if (outcome.httpStatus !== null) {
        span?.set({ 'http.response.status_code': outcome.httpStatus });
      }
      if (!outcome.ok) {
        span?.fail(outcome.httpStatus === null ? 'not delivered' : `HTTP ${outcome.httpStatus}`);
      }
      if (outcome.ok) {
        await this.callbacks.markDelivered(jobId, outcome.httpStatus);
        this.logger.log(`job ${jobId}: callback delivered (HTTP ${outcome.httpStatus})`);
        return;
      }
      const attempts = callback.attempts + 1;
      const retryAt = this.retryPolicy.nextAttemptAt(callback.createdAt, attempts, new Date());
      await this.callbacks.recordFailure(jobId, outcome, retryAt);
      if (retryAt === null) {
        this.logger.warn(
          `job ${jobId}: callback failed after ${attempts} attempt(s), giving up: ${outcome.error}`,
        );
      } else {
        this.logger.log(
          `job ${jobId}: callback attempt ${attempts} failed (${outcome.error}); next at ${retryAt.toISOString()}`,
        );
        this.wakeAt(retryAt);
      }
    } catch (error) {
      if (error instanceof ShutdownAbort) {
        await this.callbacks.release(jobId).catch(() => undefined);
        return;
      }
      // The database failed: the claim's lease ends and the callback is taken again.
      this.logger.warn(`job ${jobId}: callback attempt not recorded: ${(error as Error).message}`);
    }
  }

  /**
   * Null when the URL passes the submission rules again now, else the failed attempt: the
   * allow-list may have changed, and a name may now resolve to a private address.
   */
  private async stillAllowed(
    applicationName: string,
    url: string,
  ): Promise<{ ok: false; httpStatus: null; error: string } | null> {
    try {
      await this.urlPolicy.check(applicationName, url);
      return null;
    } catch (error) {
      return { ok: false, httpStatus: null, error: `not sent: ${(error as Error).message}` };
    }
  }

  /** One POST; throws ShutdownAbort when this node's shutdown cut it short. */
  private async post(
    url: string,
    body: Buffer,
    headers: Record<string, string>,
  ): Promise<
    { ok: true; httpStatus: number } | { ok: false; httpStatus: number | null; error: string }
  > {
    const timeoutSeconds = this.config.callbackTimeoutSeconds;
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers,
        body,
        // A redirect is an answer, not a new destination: the allow-list checked this URL only.
        redirect: 'manual',
        signal: AbortSignal.any([this.shutdown.signal, AbortSignal.timeout(timeoutSeconds * 1000)]),
      });
      // The answer's body is not used; reading it lets the connection be reused.
      await response.arrayBuffer().catch(() => undefined);
      return response.status >= 200 && response.status < 300
        ? { ok: true, httpStatus: response.status }
        : { ok: false, httpStatus: response.status, error: `HTTP ${response.status}` };
    } catch (error) {
      if (this.shutdown.signal.aborted) {
        throw new ShutdownAbort();
      }
      return { ok: false, httpStatus: null, error: failureText(error, timeoutSeconds) };
    }
  }

  /** A local timer for a retry this node scheduled; polling is the fallback. */
  private wakeAt(at: Date): void {
    const timer = setTimeout(
      () => {
        this.timers.delete(timer);
        this.wake();
      },
      Math.max(0, at.getTime() - Date.now()) + 5,
    );
    timer.unref();
    this.timers.add(timer);
  }

  /** Stops taking callbacks and cuts running attempts short; they are due again at once. */
  async onApplicationShutdown(): Promise<void> {
    this.stopping = true;
    this.unsubscribe?.();
    for (const timer of this.timers) {
      clearTimeout(timer);
    }
    this.shutdown.abort(new ShutdownAbort());
    await Promise.all(this.inFlight.values());
  }
}
