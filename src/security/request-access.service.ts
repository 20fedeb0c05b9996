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
import { AdminAccountsService } from './admin-accounts.service';
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
    /** Admins made at run time sign in with Basic in every mode, as ADMIN_USER does. */
    @Optional() private readonly adminAccounts?: AdminAccountsService,
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
   * own or no session cookie (then they decide), null for a cookie of no live session. Where it
   * may come from is the access guard's question first (refuseCrossSite).
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
   * Refuses (403) a request that changes something (any method but GET, HEAD, OPTIONS), carries a
   * credential a browser sends by itself, and comes from another site: another site's form or
   * script riding a signed-in browser. Asked by the access guard first, on every route, before
   * any credential is checked or any body read. A credential from code (a bearer token, an API
   * key) cannot be attached by another site's page, so it is judged as usual.
   */
  refuseCrossSite(req: Request): void {
    if (
      !SAFE_METHODS.has(req.method) &&
      sendsBrowserCredentials(req) &&
      !isSameOrigin(req, publicBaseUrl(req, this.configuredBaseUrl))
    ) {
      throw new ApiError(
        HttpStatus.FORBIDDEN,
        'Refused: a request that changes something with credentials a browser sends by itself ' +
          '(HTTP Basic, the sign-in cookie) must come from the page of this service, not from ' +
          'another site; a client on another origin sends a bearer token or an API key instead.',
      );
    }
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
   * when a bearer token was refused), Basic for users, ADMIN_USER and admins made at run time.
   */
  private unauthorized(message: string, bearerError?: string): ApiError {
    const basic = `Basic ${REALM}, charset="UTF-8"`;
    const bearer = this.methods.has('apiKey') || this.methods.has('oidc');
    const challenges = [
      ...(bearer ? [`Bearer ${REALM}${bearerError ? `, ${bearerError}` : ''}`] : []),
      ...(!bearer ||
      this.methods.has('basic') ||
      this.adminUserConfigured ||
      this.adminAccounts?.any === true
        ? [basic]
        : []),
    ];
    return new ApiError(HttpStatus.UNAUTHORIZED, message, {
      'WWW-Authenticate': challenges.join(', '),
    });
  }
}

/**
 * Whether the request carries a credential that a browser attaches by itself, whoever's page
 * made the request: the page's session cookie (whether or not it is still valid), or an
 * Authorization of any scheme but Bearer (a browser caches Basic after one prompt, and would
 * send Digest or Negotiate likewise). A bearer token or X-SVC-API-Key is only ever set by code,
 * which another site's page cannot do here without a preflight that no origin passes with
 * credentials (CORS_ORIGINS never allows them).
 */
export function sendsBrowserCredentials(req: Request): boolean {
  return (
    rawHeaderValues(req, 'cookie').some((header) =>
      header.split(';').some((pair) => pair.split('=', 1)[0].trim() === SESSION_COOKIE),
    ) || rawHeaderValues(req, 'authorization').some((value) => !/^\s*bearer(\s|$)/i.test(value))
  );
}

/**
 * Whether a browser's request comes from this service's own origin. Every current browser sends
 * Sec-Fetch-Site: it must be same-origin, or none (typed by the user). Origin, when sent, must
 * name the host the request was sent to or the public base URL's; `null` (a sandboxed frame, a
 * page that sends no referrer, a redirect through another site) counts only when Sec-Fetch-Site
 * vouches for the same origin. Without either (an older browser), a Referer must name the
 * service's host too. A request with none of the three is no browser's.
 */
export function isSameOrigin(req: Request, baseUrl: string): boolean {
  const sites = rawHeaderValues(req, 'sec-fetch-site').map((site) => site.trim().toLowerCase());
  if (sites.some((site) => site !== 'same-origin' && site !== 'none')) {
    return false;
  }
  const origins = rawHeaderValues(req, 'origin').map((origin) => origin.trim());
  if (origins.length > 0) {
    const vouched = sites.includes('same-origin');
    return origins.every((origin) =>
      origin === 'null' ? vouched : isOwnHost(origin, req, baseUrl),
    );
  }
  if (sites.length > 0) {
    return true;
  }
  return rawHeaderValues(req, 'referer').every((referer) => isOwnHost(referer, req, baseUrl));
}

/** Whether `url`'s host (with its port) is the request's Host or the public base URL's host. */
function isOwnHost(url: string, req: Request, baseUrl: string): boolean {
  try {
    const base = new URL(baseUrl);
    const host = new URL(url).host;
    const requested = req.headers.host;
    return (
      host === base.host ||
      (requested !== undefined && host === new URL(`${base.protocol}//${requested}`).host)
    );
  } catch {
    return false;
  }
}
