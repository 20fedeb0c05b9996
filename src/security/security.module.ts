import { Global, Module } from '@nestjs/common';
import { AccessGuard } from './access.guard';
import { AccessPolicyService } from './access-policy.service';
import { AuthenticationService } from './authentication.service';
import { EventStreamQuota } from './event-stream-quota';
import { HeldRights } from './held-rights';
import { RequestAccessService } from './request-access.service';
import { OidcTokenVerifier } from './oidc-token.verifier';

/**
 * Authentication, the access policy and the global guard (docs/security.md). Global, so the
 * form and SOAP front ends can ask RequestAccessService / AccessPolicyService without importing
 * it. The guard itself is registered as APP_GUARD by ApiModule, ahead of NegotiationGuard.
 */
@Global()
@Module({
  providers: [
    AccessPolicyService,
    AuthenticationService,
    OidcTokenVerifier,
    RequestAccessService,
    AccessGuard,
    EventStreamQuota,
    HeldRights,
  ],
  exports: [
    AccessPolicyService,
    AuthenticationService,
    OidcTokenVerifier,
    RequestAccessService,
    AccessGuard,
    EventStreamQuota,
    HeldRights,
  ],
})
export class SecurityModule {}
