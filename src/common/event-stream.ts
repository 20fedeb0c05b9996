import type { ServerResponse } from 'node:http';
import type { MessageEvent } from '@nestjs/common';
import { Observable, type TeardownLogic } from 'rxjs';

/**
 * Where a producer of Server-Sent Events sends them. It must respect back-pressure: once `next`
 * returns false the reader has not taken what was written, and the producer sends nothing more
 * (but a last event through `end`) until `ready()` has resolved.
 */
export interface EventSink {
  /** Sends an event; false: the reader is behind, wait for `ready()` before the next one. */
  next(event: MessageEvent): boolean;
  /** Resolves once the reader has taken what was written, or the stream is over. */
  ready(): Promise<void>;
  /** Ends the stream, after `last` when given. */
  complete(last?: MessageEvent): void;
  /** The stream is over: its client went, it was ended or cut. */
  readonly closed: boolean;
}

/** Runs a stream into its sink; returns what stops it (called once, however it ends). */
export type EventProducer = (sink: EventSink) => TeardownLogic;

/**
 * What one reader of an event stream may have waiting on the node beyond the socket's own
 * buffer: a producer that ignored `next`'s false and got this far ahead is cut at once.
 * Producers that respect back-pressure stay within one event of the socket's buffer.
 */
export const EVENT_STREAM_MAX_BUFFERED_BYTES = 1024 * 1024;

/** What the answer's headers say (as Nest's own event streams did). */
const HEADERS = {
  'Content-Type': 'text/event-stream',
  Connection: 'keep-alive',
  'Cache-Control': 'private, no-cache, no-store, must-revalidate, max-age=0, no-transform',
  Pragma: 'no-cache',
  Expires: '0',
  // Proxies such as nginx would otherwise hold events back in their buffers.
  'X-Accel-Buffering': 'no',
};

/**
 * An event stream a handler returns (docs/architecture.md#a-request): written by
 * HttpAnswerAdapter to the response with back-pressure, one event at a time as the reader takes
 * them (`EventSink`); a reader that takes nothing for STREAM_SLOW_READER_SECONDS is cut by the
 * server (`common/slow-readers.ts`). Not an Observable: Nest would wait for an Observable a
 * handler returns to complete, and then send its last value.
 */
export class EventStream {
  constructor(readonly producer: EventProducer) {}

  /** The events as an Observable whose subscriber takes every event at once (tests, in-process readers). */
  asObservable(): Observable<MessageEvent> {
    const producer = this.producer;
    return new Observable<MessageEvent>((subscriber) =>
      producer({
        next: (event) => {
          subscriber.next(event);
          return true;
        },
        ready: () => Promise.resolve(),
        complete: (last) => {
          if (last && !subscriber.closed) {
            subscriber.next(last);
          }
          subscriber.complete();
        },
        get closed() {
          return subscriber.closed;
        },
      }),
    );
  }

  /** This stream with `around` run on its sink first (to end it early, count it, …). */
  around(around: (sink: EventSink) => TeardownLogic): EventStream {
    return new EventStream((sink) => {
      const before = around(sink);
      const inner = sink.closed ? undefined : this.producer(sink);
      return () => {
        runTeardown(inner);
        runTeardown(before);
      };
    });
  }

  /** Writes the stream to `res`: the headers now, then each event as the producer sends it. */
  writeTo(res: ServerResponse, method: string | undefined): void {
    new ResponseSink(res).start(this.producer, method === 'HEAD');
  }
}

function runTeardown(teardown: TeardownLogic): void {
  if (typeof teardown === 'function') {
    teardown();
  } else if (teardown && 'unsubscribe' in teardown) {
    teardown.unsubscribe();
  }
}

/** One event in the text/event-stream format (a comment: `: text`). */
export function formatEvent(event: MessageEvent): string {
  const oneLine = (value: unknown): string => String(value).replace(/[\r\n]/g, '');
  const lines = (value: string, prefix: string): string =>
    value
      .split(/\r\n|\r|\n/)
      .map((line) => `${prefix}${line}\n`)
      .join('');
  let text = '';
  if (event.type !== undefined) {
    text += `event: ${oneLine(event.type)}\n`;
  }
  if (event.id !== undefined) {
    text += `id: ${oneLine(event.id)}\n`;
  }
  if (event.retry !== undefined) {
    text += `retry: ${oneLine(event.retry)}\n`;
  }
  if (event.comment !== undefined) {
    text += lines(event.comment, ': ');
  }
  if (event.data !== undefined) {
    text += lines(
      typeof event.data === 'string' ? event.data : JSON.stringify(event.data),
      'data: ',
    );
  }
  return `${text}\n`;
}

/** The sink of one HTTP response. */
class ResponseSink implements EventSink {
  private over = false;
  private teardown: TeardownLogic = undefined;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly res: ServerResponse) {}

  get closed(): boolean {
    return this.over;
  }

  start(producer: EventProducer, headOnly: boolean): void {
    const res = this.res;
    if (res.destroyed || res.writableEnded) {
      this.finish();
      return;
    }
    res.socket?.setKeepAlive(true);
    res.socket?.setNoDelay(true);
    res.socket?.setTimeout(0);
    res.writeHead(200, HEADERS);
    res.flushHeaders();
    if (headOnly) {
      res.end();
      this.finish();
      return;
    }
    res.once('close', () => this.finish());
    res.on('drain', () => this.wake());
    this.teardown = producer(this);
    if (this.over) {
      // Ended while it started: its teardown was not known yet.
      runTeardown(this.teardown);
    }
  }

  next(event: MessageEvent): boolean {
    if (this.over) {
      return false;
    }
    const taken = this.res.write(formatEvent(event));
    if (this.res.writableLength > EVENT_STREAM_MAX_BUFFERED_BYTES) {
      this.res.destroy();
      this.finish();
      return false;
    }
    return taken;
  }

  ready(): Promise<void> {
    if (this.over || !this.res.writableNeedDrain) {
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  complete(last?: MessageEvent): void {
    if (this.over) {
      return;
    }
    this.res.end(last ? formatEvent(last) : undefined);
    this.finish();
  }

  private wake(): void {
    for (const resolve of this.waiting.splice(0)) {
      resolve();
    }
  }

  private finish(): void {
    if (this.over) {
      return;
    }
    this.over = true;
    this.wake();
    runTeardown(this.teardown);
  }
}
