import { setTimeout as delay } from 'node:timers/promises';
import { Injectable } from '@nestjs/common';
import { QueueNotifier } from '../queue/queue-notifier.service';
import { ResultMetadata, ResultRepository } from '../results/result.repository';

/** First pause between two looks at the result table; it doubles up to the maximum. */
const FIRST_POLL_MS = 25;
const MAX_POLL_MS = 1000;

/**
 * Waits for a job's result. The result-ready notification (from this node's worker at once, from
 * other nodes over LISTEN) ends a pause early; polling the result table with back-off stays the
 * source of truth, since a notification can be lost while the LISTEN connection is down.
 */
@Injectable()
export class ResultWaiter {
  constructor(
    private readonly results: ResultRepository,
    private readonly notifier: QueueNotifier,
  ) {}

  /**
   * The result's metadata once it exists; null when `timeoutMs` passed first. Stops early
   * (null) when `signal` aborts, e.g. the client went away.
   */
  async waitFor(
    applicationName: string,
    jobId: string,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<ResultMetadata | null> {
    const deadline = Date.now() + timeoutMs;
    let pause = FIRST_POLL_MS;
    let wake = new AbortController();
    const unsubscribe = this.notifier.onResultReady((readyJobId) => {
      if (readyJobId === jobId) {
        wake.abort();
      }
    });
    try {
      for (;;) {
        const result = await this.results.findMetadata(applicationName, jobId);
        if (result) {
          return result;
        }
        const left = deadline - Date.now();
        if (left <= 0 || signal?.aborted) {
          return null;
        }
        const pauseSignal = signal ? AbortSignal.any([signal, wake.signal]) : wake.signal;
        try {
          await delay(Math.min(pause, left), undefined, { signal: pauseSignal });
        } catch {
          if (signal?.aborted) {
            return null; // the caller gave up
          }
          wake = new AbortController(); // woken by the notification: look again now
        }
        pause = Math.min(pause * 2, MAX_POLL_MS);
      }
    } finally {
      unsubscribe();
    }
  }
}
