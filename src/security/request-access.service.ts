import { HttpStatus, Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { ApiError } from '../common/api-error';
import { AppConfig } from '../config/app-config';
import { AccessDecision, AccessPolicyService, SubmissionKind } from './access-policy.service';
import { API_KEY_HEADER, AuthenticationService } from './authentication.service';
import { Principal, principalOf, rememberPrincipal } from './principal';
import { authMethodsOf, type AuthMethod, type AuthMode } from '../config/security-settings';

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

  constructor(
    config: AppConfig,
    private readonly policy: AccessPolicyService,
    private readonly authentication: AuthenticationService,
  ) {
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
    const outcome = await this.authentication.authenticate(req);
    switch (outcome.kind) {
      case 'throttled':
        throw new ApiError(
          HttpStatus.TOO_MANY_REQUESTS,
          `Too many failed authentications from this address; try again in ${outcome.retryAfterSeconds} s.`,
          { 'Retry-After': String(outcome.retryAfterSeconds) },
        );
      case 'failed':
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
        return outcome.principal;
    }
  }

  /**
   * For a submission whose application the guard could not see (the form post names it in the
   * body; SOAP in the envelope): throws the 401 or 403 the caller must get, or returns.
   */
  async authorizeSubmission(
    req: Request,
    application: string,
    kind: SubmissionKind,
  ): Promise<void> {
    const principal = this.authMode === 'none' ? null : await this.principalOf(req);
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
