import { setTimeout as delay } from 'node:timers/promises';
import { Injectable } from '@nestjs/common';
import { ResultMetadata, ResultRepository } from '../results/result.repository';

/** First pause between two looks at the result table; it doubles up to the maximum. */
const FIRST_POLL_MS = 25;
const MAX_POLL_MS = 1000;

/**
 * Waits for a job's result by polling the result table with back-off: a function call is
 * answered within a few short polls, a long script job costs one query a second. Polling the
 * table (not a notification) keeps it right on any API node, whichever worker ran the job.
 */
@Injectable()
export class ResultWaiter {
  constructor(private readonly results: ResultRepository) {}

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
    for (;;) {
      const result = await this.results.findMetadata(applicationName, jobId);
      if (result) {
        return result;
      }
      const left = deadline - Date.now();
      if (left <= 0 || signal?.aborted) {
        return null;
      }
      try {
        await delay(Math.min(pause, left), undefined, { signal });
      } catch {
        return null; // aborted
      }
      pause = Math.min(pause * 2, MAX_POLL_MS);
    }
  }
}
