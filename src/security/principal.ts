import type { Request } from 'express';
import type { PrincipalKind } from '../config/security-settings';

/** Who made a request, once authenticated. */
export interface Principal {
  /** Who vouches for the name: a user of USERS or ADMIN_USER, an API key, the issuer's token. */
  kind: PrincipalKind;
  /** The name within its kind: a user name, a key's principal, a token's name, a client id. */
  name: string;
  /**
   * `<kind>:<name>`: what rules name, and what the audit trail, rate limits and records of who
   * did something keep, so names of different kinds never meet (docs/security.md#who-a-caller-is).
   */
  id: string;
  roles: readonly string[];
  /**
   * How the caller proved it: a configured user, an API key, the ADMIN_USER of the environment,
   * or an access token from the OpenID Connect issuer.
   */
  source: 'user' | 'apiKey' | 'adminUser' | 'oidc';
}

const SOURCE_OF_KIND: Record<PrincipalKind, Principal['source']> = {
  user: 'user',
  key: 'apiKey',
  oidc: 'oidc',
  client: 'oidc',
};

/** A principal of `kind`; `adminUser` for ADMIN_USER (a Basic user in every mode). */
export function makePrincipal(
  kind: PrincipalKind,
  name: string,
  roles: readonly string[],
  adminUser = false,
): Principal {
  return {
    kind,
    name,
    id: `${kind}:${name}`,
    roles,
    source: adminUser ? 'adminUser' : SOURCE_OF_KIND[kind],
  };
}

const PRINCIPAL = Symbol('principal');
type RequestWithPrincipal = Request & { [PRINCIPAL]?: Principal | null };

export function rememberPrincipal(req: Request, principal: Principal | null): void {
  (req as RequestWithPrincipal)[PRINCIPAL] = principal;
}

/**
 * The caller the access guard authenticated: a principal, null for an anonymous caller, and
 * undefined when the guard has not looked at this request.
 */
export function principalOf(req: Request): Principal | null | undefined {
  return (req as RequestWithPrincipal)[PRINCIPAL];
}
