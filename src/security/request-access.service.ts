import { HttpStatus, Injectable, Optional } from '@nestjs/common';
import type { Request } from 'express';
import { ApiError } from '../common/api-error';
import { AppConfig } from '../config/app-config';
import { AccessDecision, AccessPolicyService, SubmissionKind } from './access-policy.service';
import { API_KEY_HEADER, AuthenticationService } from './authentication.service';
import { Principal, principalOf, rememberPrincipal } from './principal';
import type { AuthMode } from '../config/security-settings';
import { identifyRequestActor } from '../common/request-actor';
import { AuditService } from '../audit/audit.service';

const REALM = 'realm="svc"';

/**
 * The HTTP side of access control: authenticates a request once (remembering the principal on
 * it), and turns the policy's decisions into the 401 / 403 / 429 answers. Used by the global
 * AccessGuard and by front ends that learn the application only from the body.
 */
@Injectable()
export class RequestAccessService {
  private readonly authMode: AuthMode;
  private readonly adminUserConfigured: boolean;

  constructor(
    config: AppConfig,
    private readonly policy: AccessPolicyService,
    private readonly authentication: AuthenticationService,
    /** Failed authentications are counted per client address in the audit trail. */
    @Optional() private readonly audit?: AuditService,
  ) {
    this.authMode = config.authMode;
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
        this.audit?.authenticationFailed(req.socket.remoteAddress ?? 'unknown');
        throw this.unauthorized('The credentials sent are not valid.');
      case 'anonymous':
        rememberPrincipal(req, null);
        return null;
      case 'authenticated':
        rememberPrincipal(req, outcome.principal);
        identifyRequestActor(outcome.principal.name, outcome.principal.source);
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
        throw this.unauthorized(
          this.authMode === 'apiKey'
            ? `Authentication required: send an API key in ${API_KEY_HEADER} or Authorization: Bearer.`
            : 'Authentication required: send HTTP Basic credentials.',
        );
      case 'forbid':
        throw new ApiError(HttpStatus.FORBIDDEN, decision.message);
      case 'hide':
        throw hidden();
    }
  }

  /** 401 with the challenges this mode answers: Basic for users and ADMIN_USER, Bearer for API keys. */
  private unauthorized(message: string): ApiError {
    const basic = `Basic ${REALM}, charset="UTF-8"`;
    const challenge =
      this.authMode === 'apiKey'
        ? `Bearer ${REALM}${this.adminUserConfigured ? `, ${basic}` : ''}`
        : basic;
    return new ApiError(HttpStatus.UNAUTHORIZED, message, { 'WWW-Authenticate': challenge });
  }
}
