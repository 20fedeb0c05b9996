import type { Request } from 'express';

/** Who made a request, once authenticated. */
export interface Principal {
  name: string;
  roles: readonly string[];
  /**
   * How the caller proved it: a configured user, an API key, the ADMIN_USER of the environment,
   * or an access token from the OpenID Connect issuer.
   */
  source: 'user' | 'apiKey' | 'adminUser' | 'oidc';
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
