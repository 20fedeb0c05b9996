import { Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { ApiError } from '../common/api-error';
import type { EventStream } from '../common/event-stream';
import { RestApiConfig } from '../config/config-slices';
import { addressBucket } from './auth-failure-limiter';
import { FurtherCheck, HeldRights } from './held-rights';
import { principalOf } from './principal';

/** What a refused stream's Retry-After says: streams end when their clients go, not on a clock. */
const RETRY_AFTER_SECONDS = 5;

/**
 * The event streams (a job's live log, the console's events) each caller holds open on this
 * node: at most EVENT_STREAMS_PER_CALLER (docs/security.md, the HTTP edge). An open stream
 * costs the node a connection and, on every wake-up, a read for as long as its client keeps
 * it, so one caller must not be able to hold them all. A caller is its principal
 * (`<kind>:<name>`, so names of different sign-in methods are counted apart), an anonymous
 * one its address (IPv6 by its /64, as failed sign-ins are counted).
 *
 * A stream is also held to the right it was opened with (HeldRights): when its caller loses it,
 * it ends with a `revoked` event that says why.
 */
@Injectable()
export class EventStreamQuota {
  private readonly held = new Map<string, number>();

  constructor(
    private readonly config: RestApiConfig,
    private readonly rights: HeldRights,
  ) {}

  /**
   * `stream`, counted as one of the request's caller's until it ends, its subscriber goes or
   * the response closes, whichever is first, and ended with a `revoked` event should its
   * caller lose the right it was opened with (or what `further` requires). Throws the 429
   * before anything is sent when the caller holds all of theirs already.
   */
  hold(req: Request, stream: EventStream, further?: FurtherCheck): EventStream {
    const release = this.take(callerOf(req));
    // Also when the stream is never subscribed to: its client went before it started, maybe
    // while the handler was still looking the job up.
    if (req.res?.closed) {
      release();
    } else {
      req.res?.once('close', release);
    }
    return stream.around((sink) => {
      const letGo = this.rights.hold(
        req,
        (reason) =>
          sink.complete({
            type: 'revoked',
            data: { message: `This stream has ended: ${reason}.` },
          }),
        further,
      );
      return () => {
        letGo();
        release();
      };
    });
  }

  /** How many streams `caller` (a principal's id, or `address:` and its bucket) holds here. */
  heldBy(caller: string): number {
    return this.held.get(caller) ?? 0;
  }

  private take(caller: string): () => void {
    const held = this.heldBy(caller);
    const limit = this.config.eventStreamsPerCaller;
    if (held >= limit) {
      throw ApiError.tooManyRequests(
        `You hold ${held} open event streams on this node, the most allowed ` +
          `(EVENT_STREAMS_PER_CALLER=${limit}); close one before opening another.`,
        RETRY_AFTER_SECONDS,
      );
    }
    this.held.set(caller, held + 1);
    let released = false;
    return () => {
      if (released) {
        return;
      }
      released = true;
      const left = this.heldBy(caller) - 1;
      if (left > 0) {
        this.held.set(caller, left);
      } else {
        this.held.delete(caller);
      }
    };
  }
}

/** Whom a request's streams are counted for. */
function callerOf(req: Request): string {
  const principal = principalOf(req);
  if (principal) {
    return principal.id;
  }
  return `address:${addressBucket(req.ip ?? req.socket.remoteAddress ?? 'unknown')}`;
}
