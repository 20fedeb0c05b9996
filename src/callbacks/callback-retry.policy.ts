import { Injectable } from '@nestjs/common';
import { AppConfig } from '../config/app-config';

/**
 * When a failed callback is tried again: CALLBACK_FIRST_RETRY_MS after the first attempt,
 * doubling after each further one up to CALLBACK_MAX_RETRY_DELAY_SECONDS, for as long as the
 * next attempt falls within CALLBACK_RETRY_SECONDS of the job's end; then never.
 */
@Injectable()
export class CallbackRetryPolicy {
  constructor(private readonly config: AppConfig) {}

  /** The wait after the `attempts`-th failed attempt (1 for the first), in milliseconds. */
  delayAfter(attempts: number): number {
    const capMs = this.config.callbackMaxRetryDelaySeconds * 1000;
    // Past 2^30 the doubling is far beyond any cap; stop it before it overflows to Infinity.
    const doubled = this.config.callbackFirstRetryMs * 2 ** Math.min(Math.max(attempts - 1, 0), 30);
    return Math.min(doubled, capMs);
  }

  /**
   * When to try again after the `attempts`-th failed attempt, made at `now`, of a callback of a
   * job that ended at `endedAt`; null when that would be past the retry period (give up).
   */
  nextAttemptAt(endedAt: Date, attempts: number, now: Date): Date | null {
    const next = new Date(now.getTime() + this.delayAfter(attempts));
    const deadline = endedAt.getTime() + this.config.callbackRetrySeconds * 1000;
    return next.getTime() <= deadline ? next : null;
  }
}
