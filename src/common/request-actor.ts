import { AsyncLocalStorage } from 'node:async_hooks';

/** Who a request acts for, for the audit trail: filled in as the request is authenticated. */
export interface RequestActor {
  requestId: string | null;
  clientAddress: string | null;
  /** The principal's name; null: anonymous (or not authenticated yet). */
  principal: string | null;
  /** How it authenticated (Principal.source), null: anonymous. */
  authMethod: string | null;
}

const storage = new AsyncLocalStorage<RequestActor>();

/** Runs `fn` (and everything it starts) as one request, for whoever authenticates in it. */
export function runAsRequest<T>(
  requestId: string | null,
  clientAddress: string | null,
  fn: () => T,
): T {
  return storage.run({ requestId, clientAddress, principal: null, authMethod: null }, fn);
}

/** Records who the current request acts for, once authenticated. */
export function identifyRequestActor(principal: string, authMethod: string): void {
  const actor = storage.getStore();
  if (actor) {
    actor.principal = principal;
    actor.authMethod = authMethod;
  }
}

/** The current request's actor, or null outside of a request (a worker, a command line). */
export function currentRequestActor(): RequestActor | null {
  return storage.getStore() ?? null;
}
