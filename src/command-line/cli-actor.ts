import { userInfo } from 'node:os';
import type { AuditActor } from '../audit/audit.service';
import { identifyRequestActor, runAsRequest } from '../common/request-actor';

/**
 * Who the command line acts as, in the audit trail: `cli:<OS user>`. In a running service this is
 * the service's own user, the only one (with root) that can reach its command socket
 * (command-channel.ts): the socket's directory is that user's alone.
 */
export function cliActor(): AuditActor {
  return { principal: `cli:${userInfo().username}`, authMethod: 'commandLine' };
}

/**
 * Runs `fn` as the command line's actor (cliActor), for services that take who acts from the
 * request: their audit rows name `cli:<OS user>`.
 */
export function asCliActor<T>(fn: () => Promise<T>): Promise<T> {
  return runAsRequest(null, null, () => {
    const actor = cliActor();
    identifyRequestActor(actor.principal ?? 'cli', actor.authMethod ?? 'commandLine');
    return fn();
  });
}
