import { EventEmitter } from 'node:events';
import type { MessageEvent } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { Request } from 'express';
import { NEVER, of, Subject } from 'rxjs';
import {
  eventStreamOf,
  fakeRequest,
  UNCHANGING_RIGHTS,
} from '../../test/support/controller-testing';
import { ApiError } from '../common/api-error';
import { RestApiConfig } from '../config/config-slices';
import { EventStreamQuota } from './event-stream-quota';
import { makePrincipal, rememberPrincipal } from './principal';

const LIMIT = 2;

/** A request of `principal` (null: anonymous, from `ip`), with a response that can close. */
function requestOf(
  principal: ReturnType<typeof makePrincipal> | null,
  ip = '203.0.113.7',
): Request & { res: EventEmitter } {
  const req = fakeRequest() as Request & { res: EventEmitter };
  Object.assign(req, { ip, res: new EventEmitter() });
  rememberPrincipal(req, principal);
  return req;
}

function refusal(open: () => unknown): ApiError {
  try {
    open();
  } catch (error) {
    return error as ApiError;
  }
  throw new Error('the stream was not refused');
}

describe('EventStreamQuota', () => {
  let quota: EventStreamQuota;
  const alice = makePrincipal('user', 'alice', []);

  beforeEach(async () => {
    const module = await Test.createTestingModule({
      providers: [
        EventStreamQuota,
        UNCHANGING_RIGHTS,
        { provide: RestApiConfig, useValue: { eventStreamsPerCaller: LIMIT } },
      ],
    }).compile();
    quota = module.get(EventStreamQuota);
  });

  it('refuses a caller one stream over the limit with a 429, and no one else', () => {
    quota.hold(requestOf(alice), eventStreamOf(NEVER)).asObservable().subscribe();
    quota.hold(requestOf(alice), eventStreamOf(NEVER)).asObservable().subscribe();
    const refused = refusal(() => quota.hold(requestOf(alice), eventStreamOf(NEVER)));
    expect(refused.getStatus()).toBe(429);
    expect(refused.message).toMatch(/EVENT_STREAMS_PER_CALLER=2/);
    expect(refused.headers['Retry-After']).toBe('5');
    expect(quota.heldBy('user:alice')).toBe(LIMIT);
    // Another caller, and the same name signed in another way, are counted apart.
    quota
      .hold(requestOf(makePrincipal('user', 'bob', [])), eventStreamOf(NEVER))
      .asObservable()
      .subscribe();
    quota
      .hold(requestOf(makePrincipal('key', 'alice', [])), eventStreamOf(NEVER))
      .asObservable()
      .subscribe();
    expect([quota.heldBy('user:bob'), quota.heldBy('key:alice')]).toEqual([1, 1]);
  });

  it('counts anonymous callers by address, an IPv6 host by its /64', () => {
    quota
      .hold(requestOf(null, '2001:db8:1:2::10'), eventStreamOf(NEVER))
      .asObservable()
      .subscribe();
    quota
      .hold(requestOf(null, '2001:db8:1:2:ffff::1'), eventStreamOf(NEVER))
      .asObservable()
      .subscribe();
    expect(
      refusal(() =>
        quota.hold(requestOf(null, '2001:db8:1:2::99'), eventStreamOf(NEVER)),
      ).getStatus(),
    ).toBe(429);
    quota
      .hold(requestOf(null, '2001:db8:1:3::10'), eventStreamOf(NEVER))
      .asObservable()
      .subscribe();
    expect(quota.heldBy('address:2001:db8:1:3::/64')).toBe(1);
  });

  it('gives a stream back when it ends, when its client goes, or when its response closes unsubscribed', () => {
    const ending = new Subject<MessageEvent>();
    quota.hold(requestOf(alice), eventStreamOf(ending)).asObservable().subscribe();
    const leaving = quota.hold(requestOf(alice), eventStreamOf(NEVER)).asObservable().subscribe();
    expect(quota.heldBy('user:alice')).toBe(2);
    ending.complete();
    leaving.unsubscribe();
    expect(quota.heldBy('user:alice')).toBe(0);
    // Never subscribed: its response closes.
    const gone = requestOf(alice);
    quota.hold(gone, eventStreamOf(NEVER));
    expect(quota.heldBy('user:alice')).toBe(1);
    gone.res.emit('close');
    expect(quota.heldBy('user:alice')).toBe(0);
    // Closed already when the stream is made (the client went during the handler's lookups).
    const early = requestOf(alice);
    Object.assign(early.res, { closed: true });
    quota.hold(early, eventStreamOf(NEVER));
    expect(quota.heldBy('user:alice')).toBe(0);
  });

  it('gives each stream back once, however many ways it ends', () => {
    quota.hold(requestOf(alice), eventStreamOf(NEVER)).asObservable().subscribe();
    const short = requestOf(alice);
    quota
      .hold(short, eventStreamOf(of({ data: 'one' })))
      .asObservable()
      .subscribe();
    short.res.emit('close');
    expect(quota.heldBy('user:alice')).toBe(1);
    quota.hold(requestOf(alice), eventStreamOf(NEVER)).asObservable().subscribe();
    // Had the short stream been given back twice, alice would hold one less and get another.
    expect(quota.heldBy('user:alice')).toBe(LIMIT);
    expect(refusal(() => quota.hold(requestOf(alice), eventStreamOf(NEVER))).getStatus()).toBe(429);
  });
});
