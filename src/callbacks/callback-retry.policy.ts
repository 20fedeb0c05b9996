import { Injectable } from '@nestjs/common';
import { backOffDelay, RandomSource } from '../common/back-off';
import { CallbackConfig } from '../config/config-slices';

/**
 * When a failed callback is tried again: at most CALLBACK_FIRST_RETRY_MS after the first attempt,
 * doubling after each further one up to CALLBACK_MAX_RETRY_DELAY_SECONDS, each wait drawn between
 * half and all of that (backOffDelay), for as long as the next attempt falls within
 * CALLBACK_RETRY_SECONDS of the job's end; then never.
 */
@Injectable()
export class CallbackRetryPolicy {
  constructor(private readonly config: CallbackConfig) {}

  /** The wait after the `attempts`-th failed attempt (1 for the first), in milliseconds. */
  delayAfter(attempts: number, random: RandomSource = Math.random): number {
    return backOffDelay(
      attempts,
      this.config.callbackFirstRetryMs,
      this.config.callbackMaxRetryDelaySeconds * 1000,
      random,
    );
  }

  /**
   * When to try again after the `attempts`-th failed attempt, made at `now`, of a callback of a
   * job that ended at `endedAt`; null when that would be past the retry period (give up).
   */
  nextAttemptAt(
    endedAt: Date,
    attempts: number,
    now: Date,
    random: RandomSource = Math.random,
  ): Date | null {
    const next = new Date(now.getTime() + this.delayAfter(attempts, random));
    const deadline = endedAt.getTime() + this.config.callbackRetrySeconds * 1000;
    return next.getTime() <= deadline ? next : null;
  }
}
