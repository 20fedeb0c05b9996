import { HttpStatus, Injectable, Optional } from '@nestjs/common';
import type { Request } from 'express';
import { ApiError } from '../common/api-error';
import { NodeConfig, SecurityConfig } from '../config/config-slices';
import { AccessDecision, AccessPolicyService, SubmissionKind } from './access-policy.service';
import { API_KEY_HEADER, AuthenticationService } from './authentication.service';
import { makePrincipal, Principal, principalOf, rememberPrincipal } from './principal';
import {
  authMethodsOf,
  parsePrincipalRule,
  type AuthMethod,
  type AuthMode,
} from '../config/security-settings';
import { identifyRequestActor } from '../common/request-actor';
import { AuditService } from '../audit/audit.service';
import { rawHeaderValues } from '../common/application-name';
import { WebSessionRepository } from './web-session.repository';
import { publicBaseUrl } from '../common/public-uri';

/** The cookie of a signed-in browser (the upload page's sign-in, AUTH_MODE with oidc). */
export const SESSION_COOKIE = 'svc_session';

/** The session cookie's value in a request, if any. */
export function sessionCookieOf(req: Request): string | null {
  for (const header of rawHeaderValues(req, 'cookie')) {
    for (const pair of header.split(';')) {
      const eq = pair.indexOf('=');
      if (eq > 0 && pair.slice(0, eq).trim() === SESSION_COOKIE) {
        const value = pair.slice(eq + 1).trim();
        return /^[\w-]{20,100}$/.test(value) ? value : null;
      }
    }
  }
  return null;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

const REALM = 'realm="svc"';

/** A string as an RFC 7230 quoted-string value (error_description allows no `"` or `\\`). */
function quoted(text: string): string {
  return `"${text.replace(/[^\x20-\x7e]|["\\]/g, '')}"`;
}

/**
 * The HTTP side of access control: authenticates a request once (remembering the principal on
 * it), and turns the policy's decisions into the 401 / 403 / 429 answers. Used by the global
 * AccessGuard and by front ends that learn the application only from the body.
 */
@Injectable()
export class RequestAccessService {
  private readonly authMode: AuthMode;
  private readonly methods: ReadonlySet<AuthMethod>;
  private readonly adminUserConfigured: boolean;
  private readonly sessionsEnabled: boolean;
  private readonly configuredBaseUrl: string | null;

  constructor(
    config: SecurityConfig,
    node: NodeConfig,
    private readonly policy: AccessPolicyService,
    private readonly authentication: AuthenticationService,
    /** The page's sessions (absent where there is no database, e.g. a bare test module). */
    @Optional() private readonly sessions?: WebSessionRepository,
    /** Failed authentications are counted per client address in the audit trail. */
    @Optional() private readonly audit?: AuditService,
  ) {
    this.configuredBaseUrl = node.publicBaseUrl;
    this.sessionsEnabled =
      authMethodsOf(config.authMode).has('oidc') && !!config.oidcClientId && sessions !== undefined;
    this.authMode = config.authMode;
    this.methods = authMethodsOf(config.authMode);
    this.adminUserConfigured = config.adminUser !== null;
  }

  /**
   * The request's principal (null: anonymous), authenticating it the first time. Wrong
   * credentials are a 401, too many failures from the address a 429.
   */
  async principalOf(req: Request): Promise<Principal | null> {
    const known = principalOf(req);
    if (known !== undefined) {
      return known;
    }
    const session = await this.sessionPrincipal(req);
    if (session !== undefined) {
      rememberPrincipal(req, session);
      if (session !== null) {
        identifyRequestActor(session.id, session.source);
      }
      return session;
    }
    const outcome = await this.authentication.authenticate(req);
    switch (outcome.kind) {
      case 'throttled':
        throw new ApiError(
          HttpStatus.TOO_MANY_REQUESTS,
          `Too many failed authentications from this address; try again in ${outcome.retryAfterSeconds} s.`,
          { 'Retry-After': String(outcome.retryAfterSeconds) },
        );
      case 'failed':
        this.audit?.authenticationFailed(req.socket.remoteAddress ?? 'unknown');
        // RFC 6750 §3.1: a bearer token that is expired, malformed or otherwise not valid.
        throw outcome.bearer
          ? this.unauthorized(
              `The bearer token is not valid: ${outcome.reason}.`,
              `error="invalid_token", error_description=${quoted(outcome.reason)}`,
            )
          : this.unauthorized('The credentials sent are not valid.');
      case 'anonymous':
        rememberPrincipal(req, null);
        return null;
      case 'authenticated':
        rememberPrincipal(req, outcome.principal);
        identifyRequestActor(outcome.principal.id, outcome.principal.source);
        return outcome.principal;
    }
  }

  /**
   * The request's caller as its credentials say now (a session signed out, a key revoked, a
   * token expired since it was authenticated): a principal, null for none sent, or why they no
   * longer hold. No failure counted, nothing remembered on the request.
   */
  async recheck(req: Request): Promise<Principal | null | { refused: string }> {
    if (this.sessionsEnabled) {
      const id = sessionCookieOf(req);
      const credentials =
        rawHeaderValues(req, 'authorization').length + rawHeaderValues(req, API_KEY_HEADER).length;
      if (id !== null && credentials === 0) {
        return (await this.sessionOf(id)) ?? { refused: 'the session has ended' };
      }
    }
    return this.authentication.recheck(req);
  }

  /**
   * The principal of a signed-in browser: undefined when the request carries credentials of its
   * own or no session cookie (then they decide), null for a cookie of no live session. A request
   * that changes something must come from the service's own pages: a browser says where it
   * comes from (Sec-Fetch-Site, Origin), and a cross-site form post or fetch is refused (403),
   * besides the cookie being SameSite=Lax.
   */
  private async sessionPrincipal(req: Request): Promise<Principal | null | undefined> {
    if (!this.sessionsEnabled) {
      return undefined;
    }
    const id = sessionCookieOf(req);
    const credentials =
      rawHeaderValues(req, 'authorization').length + rawHeaderValues(req, API_KEY_HEADER).length;
    if (id === null || credentials > 0) {
      return undefined;
    }
    if (
      !SAFE_METHODS.has(req.method) &&
      !isSameOrigin(req, publicBaseUrl(req, this.configuredBaseUrl))
    ) {
      throw new ApiError(
        HttpStatus.FORBIDDEN,
        'Refused: a request signed in by cookie that changes something must come from the page of this service, not from another site.',
      );
    }
    return this.sessionOf(id);
  }

  /** The principal of a live session, null for none. */
  private async sessionOf(id: string): Promise<Principal | null> {
    const session = (await this.sessions?.find(id)) ?? null;
    // A session names its principal with its kind; one stored without (before kinds) is no
    // session: its browser signs in again.
    const named = session === null ? null : parsePrincipalRule(session.principal);
    return session !== null && (named?.kind === 'oidc' || named?.kind === 'client')
      ? makePrincipal(named.kind, named.name, session.roles)
      : null;
  }

  /**
   * The caller of a front end that the guard lets through unauthenticated (SOAP answers its own
   * faults): its principal, authenticating it (401, 429); null when anonymous or AUTH_MODE=none.
   */
  async callerOf(req: Request): Promise<Principal | null> {
    return this.authMode === 'none' ? null : await this.principalOf(req);
  }

  /**
   * Whether `principal` may submit this kind of job to the application: throws the 401 or 403
   * the caller must get, or returns. Asked by the intake, once per submission, whatever its
   * front end (JobsService.submit).
   */
  authorizeSubmission(
    principal: Principal | null,
    application: string,
    kind: SubmissionKind,
  ): void {
    this.enforce(this.policy.decide(principal, { rule: 'submitJob', application, kind }));
  }

  /** Throws the answer for a denial; `hide` becomes the given not-found error. */
  enforce(
    decision: AccessDecision,
    hidden: () => ApiError = () => ApiError.notFound('Not found.'),
  ): void {
    switch (decision.outcome) {
      case 'allow':
        return;
      case 'authenticate':
        throw this.unauthorized(`Authentication required: send ${this.acceptedCredentials()}.`);
      case 'forbid':
        throw new ApiError(HttpStatus.FORBIDDEN, decision.message);
      case 'hide':
        throw hidden();
    }
  }

  private acceptedCredentials(): string {
    const accepted: string[] = [];
    if (this.methods.has('oidc')) {
      accepted.push('an access token from the identity provider in Authorization: Bearer');
    }
    if (this.methods.has('apiKey')) {
      accepted.push(`an API key in ${API_KEY_HEADER} or Authorization: Bearer`);
    }
    if (this.methods.has('basic') || accepted.length === 0) {
      accepted.push('HTTP Basic credentials');
    }
    return accepted.join(', or ');
  }

  /**
   * 401 with the challenges this mode answers: Bearer for API keys and tokens (with `bearerError`
   * when a bearer token was refused), Basic for users and ADMIN_USER.
   */
  private unauthorized(message: string, bearerError?: string): ApiError {
    const basic = `Basic ${REALM}, charset="UTF-8"`;
    const bearer = this.methods.has('apiKey') || this.methods.has('oidc');
    const challenges = [
      ...(bearer ? [`Bearer ${REALM}${bearerError ? `, ${bearerError}` : ''}`] : []),
      ...(!bearer || this.methods.has('basic') || this.adminUserConfigured ? [basic] : []),
    ];
    return new ApiError(HttpStatus.UNAUTHORIZED, message, {
      'WWW-Authenticate': challenges.join(', '),
    });
  }
}

/**
 * Whether a browser's request comes from this service's own origin: Sec-Fetch-Site (every
 * current browser sends it) must be same-origin or none (typed by the user), and Origin, when
 * sent, must name the host the request was sent to or the public base URL's. A request without either is no browser's.
 */
function isSameOrigin(req: Request, baseUrl: string): boolean {
  const [site] = rawHeaderValues(req, 'sec-fetch-site');
  if (site !== undefined && site !== 'same-origin' && site !== 'none') {
    return false;
  }
  const [origin] = rawHeaderValues(req, 'origin');
  if (origin === undefined) {
    return true;
  }
  try {
    const host = new URL(origin).host;
    return host === req.headers.host || host === new URL(baseUrl).host;
  } catch {
    return false;
  }
}
