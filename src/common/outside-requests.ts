import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Every AsyncLocalStorage as it stands when this module loads, at start-up: no request, no job,
 * no span is active then (docs/security.md#what-timers-run-as).
 */
const atStartUp = AsyncLocalStorage.snapshot();

/**
 * Runs `fn` (and every timer, promise and callback it starts) outside of any request: without
 * the request's actor (request-actor.ts), its log context (log-context.ts) and its span. Work a
 * request merely wakes (a schedule's pass, the workers' claims, the mail poll, a deferred audit
 * write) is armed through this, so it never acts, logs or traces as that request.
 */
export function outsideRequests<T>(fn: () => T): T {
  return atStartUp(fn);
}
