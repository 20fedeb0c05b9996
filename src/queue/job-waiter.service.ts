import { BeforeApplicationShutdown, Injectable } from '@nestjs/common';
import { QueueNotifier } from './queue-notifier.service';

/**
 * A look at the database this often all the same: the backstop for a LISTEN connection that is
 * broken without the node knowing (a silent network cut, a pooler that drops notifications).
 */
const BACKSTOP_LOOK_MS = 30_000;

/** What wakes a waiter: the job's result was stored, or also its start. */
export type JobEvents = 'result' | 'result-or-start';

/**
 * Waits for something about one job (its result stored, its state changed) without polling: the
 * caller's `look` runs once at the start and again only when a notification about the job comes
 * (from this node at once, from other nodes over LISTEN) or the LISTEN connection comes back
 * (what was sent while it was down is lost), with a backstop look every 30 s. A thousand waiting
 * clients therefore cost no database query each per second, one per event about their job.
 */
@Injectable()
export class JobWaiter implements BeforeApplicationShutdown {
  /** Ends every wait when the node stops, so that waiting requests answer before it closes. */
  private readonly stopping = new AbortController();

  constructor(private readonly notifier: QueueNotifier) {}

  beforeApplicationShutdown(): void {
    this.stopping.abort();
  }

  /**
   * The first non-null value of `look`; null when `timeoutMs` passed first or `signal` aborted
   * (the client went away, the node stops).
   */
  async waitFor<T>(
    jobId: string,
    look: () => Promise<T | null>,
    timeoutMs: number,
    options: { events?: JobEvents; signal?: AbortSignal } = {},
  ): Promise<T | null> {
    const { events = 'result' } = options;
    // Not AbortSignal.any: its tie to the long-lived stopping signal would outlive each wait.
    const ended = new AbortController();
    const end = (): void => ended.abort();
    const sources = [options.signal, this.stopping.signal].filter((s) => s !== undefined);
    sources.forEach((source) => source.addEventListener('abort', end, { once: true }));
    if (sources.some((source) => source.aborted)) {
      end();
    }
    const signal = ended.signal;
    let woken = false;
    let wake: (() => void) | null = null;
    const poke = (): void => {
      woken = true;
      wake?.();
    };
    const forJob = (id: string): void => {
      if (id === jobId) {
        poke();
      }
    };
    const unsubscribe = [
      this.notifier.onResultReady(forJob),
      this.notifier.onListening(poke),
      ...(events === 'result-or-start' ? [this.notifier.onJobStarted(forJob)] : []),
    ];
    const deadline = Date.now() + timeoutMs;
    try {
      for (;;) {
        woken = false;
        const value = await look();
        if (value !== null) {
          return value;
        }
        if (woken) {
          continue; // an event came while looking: look again
        }
        const left = deadline - Date.now();
        if (left <= 0 || signal.aborted) {
          return null;
        }
        await this.pause(Math.min(left, BACKSTOP_LOOK_MS), signal, (w) => (wake = w));
        if (signal.aborted || (!woken && Date.now() >= deadline)) {
          return null;
        }
      }
    } finally {
      unsubscribe.forEach((off) => off());
      sources.forEach((source) => source.removeEventListener('abort', end));
    }
  }

  /** Resolves when woken, after `ms`, or when `signal` aborts, whichever comes first. */
  private pause(
    ms: number,
    signal: AbortSignal | undefined,
    onWake: (wake: () => void) => void,
  ): Promise<void> {
    return new Promise<void>((resolve) => {
      const finish = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', finish);
        onWake(() => undefined);
        resolve();
      };
      const timer = setTimeout(finish, ms);
      signal?.addEventListener('abort', finish, { once: true });
      onWake(finish);
    });
  }
}
