import { HttpStatus, Injectable, Logger, Optional } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import type { Configuration } from 'openid-client';
import { AuditService } from '../audit/audit.service';
import { ApiError } from '../common/api-error';
import { SecurityConfig } from '../config/config-slices';
import { authMethodsOf } from '../config/security-settings';
import { OidcTokenVerifier } from '../security/oidc-token.verifier';
import { WebSessionRepository } from '../security/web-session.repository';
import { SignInStateSealer } from './sign-in-state';

/** A sign-in must come back from the provider within this time. */
const SIGN_IN_LIFETIME_MS = 10 * 60_000;

type OpenIdClient = typeof import('openid-client');

/**
 * openid-client 6 is published as ES modules only. Node 20.19+ loads it with require(), which
 * is what TypeScript makes of this import() in our CommonJS build; loaded on the first sign-in,
 * so that nothing else (and no test that does not sign in) needs it.
 */
function loadOpenIdClient(): Promise<OpenIdClient> {
  return import('openid-client');
}

/**
 * The upload page's sign-in (AUTH_MODE with oidc and OIDC_CLIENT_ID): the authorization-code
 * flow with PKCE through openid-client (its state sealed in a cookie, sign-in-state.ts: nothing is
 * stored for an anonymous request), then a server-side session in PostgreSQL. The principal
 * and roles come from the access token, checked by the same OidcTokenVerifier and rules as
 * bearer tokens, so the page grants nothing a token would not.
 */
@Injectable()
export class SignInService {
  private readonly logger = new Logger('SignIn');
  readonly enabled: boolean;
  private configuration: Promise<{ client: OpenIdClient; config: Configuration }> | null = null;
  private readonly sealer: SignInStateSealer;

  constructor(
    private readonly security: SecurityConfig,
    private readonly tokens: OidcTokenVerifier,
    private readonly sessions: WebSessionRepository,
    @InjectDataSource() private readonly dataSource: DataSource,
    @Optional() private readonly audit?: AuditService,
  ) {
    this.enabled = authMethodsOf(security.authMode).has('oidc') && !!security.oidcClientId;
    this.sealer = new SignInStateSealer(security.signInSecret ?? security.oidcClientSecret);
    if (this.enabled && security.signInSecret === null && security.oidcClientSecret === null) {
      this.logger.warn(
        'a sign-in must come back to the node that started it: set SIGN_IN_SECRET (the same on every API node) when there are several',
      );
    }
  }

  get sessionLifetimeMs(): number {
    return this.security.oidcSessionHours * 3600_000;
  }

  /** Starts a sign-in: the cookie value that carries it (sealed) and the provider's URL to send the browser to. */
  async start(redirectUri: string): Promise<{ signInState: string; location: string }> {
    const { client, config } = await this.provider();
    const checks = {
      codeVerifier: client.randomPKCECodeVerifier(),
      state: client.randomState(),
      nonce: client.randomNonce(),
    };
    const signInState = this.sealer.seal(checks, Date.now() + SIGN_IN_LIFETIME_MS);
    const location = client.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope: this.security.oidcScope,
      code_challenge: await client.calculatePKCECodeChallenge(checks.codeVerifier),
      code_challenge_method: 'S256',
      state: checks.state,
      nonce: checks.nonce,
    });
    return { signInState, location: location.href };
  }

  /**
   * Finishes a sign-in on the provider's redirect (`currentUrl`, with code and state): a new
   * session's cookie value and its principal. Anything wrong is a 400 saying what.
   */
  async finish(
    signInState: string | null,
    currentUrl: URL,
  ): Promise<{ sessionId: string; principal: string }> {
    const checks = signInState === null ? null : this.sealer.open(signInState, Date.now());
    if (checks === null) {
      throw new ApiError(
        HttpStatus.BAD_REQUEST,
        'No sign-in is under way in this browser (or it took longer than 10 minutes): sign in again.',
      );
    }
    const { client, config } = await this.provider();
    let accessToken: string;
    try {
      const answer = await client.authorizationCodeGrant(config, currentUrl, {
        pkceCodeVerifier: checks.codeVerifier,
        expectedState: checks.state,
        expectedNonce: checks.nonce,
        idTokenExpected: true,
      });
      accessToken = answer.access_token;
    } catch (error) {
      this.logger.warn(
        `a sign-in failed: ${error instanceof Error ? error.message : String(error)}`,
      );
      throw new ApiError(
        HttpStatus.BAD_REQUEST,
        'The identity provider did not sign you in: sign in again.',
      );
    }
    const verified = await this.tokens.verify(accessToken);
    if ('refused' in verified) {
      this.logger.warn(`the access token of a sign-in was refused: ${verified.refused}`);
      throw new ApiError(
        HttpStatus.BAD_REQUEST,
        `The identity provider's access token is not one for this service (${verified.refused}); see OIDC_SCOPE and OIDC_AUDIENCE in docs/security.md.`,
      );
    }
    // The session keeps the principal's kind with its name (oidc:<name> or client:<id>).
    const { id: principal, roles } = verified.principal;
    await this.sessions.deleteExpired();
    // The session and its audit row commit together.
    const sessionId = await this.dataSource.transaction(async (manager) => {
      const id = await this.sessions.create(principal, roles, this.sessionLifetimeMs, manager);
      await this.audit?.record({ action: 'signed.in' }, manager, {
        principal,
        authMethod: 'oidc',
      });
      return id;
    });
    this.logger.log(`${principal} signed in to the upload page`);
    return { sessionId, principal };
  }

  async signOut(sessionId: string | null): Promise<void> {
    if (sessionId !== null) {
      await this.dataSource.transaction(async (manager) => {
        const principal = await this.sessions.delete(sessionId, manager);
        if (principal !== null) {
          await this.audit?.record({ action: 'signed.out' }, manager, {
            principal,
            authMethod: 'oidc',
          });
        }
      });
    }
  }

  /** The provider's configuration, discovered once (again after a failure). */
  private provider(): Promise<{ client: OpenIdClient; config: Configuration }> {
    this.configuration ??= (async () => {
      const client = await loadOpenIdClient();
      const issuer = new URL(this.security.oidcIssuer ?? '');
      const config = await client.discovery(
        issuer,
        this.security.oidcClientId ?? '',
        this.security.oidcClientSecret ?? undefined,
        this.security.oidcClientSecret ? undefined : client.None(),
        // OIDC_ISSUER is https except on localhost (checked at start-up).
        issuer.protocol === 'http:' ? { execute: [client.allowInsecureRequests] } : undefined,
      );
      return { client, config };
    })().catch((error: unknown) => {
      this.configuration = null;
      this.logger.warn(
        `the identity provider did not answer: ${error instanceof Error ? error.message : String(error)}`,
      );
      throw new ApiError(
        HttpStatus.SERVICE_UNAVAILABLE,
        'The identity provider does not answer; try again shortly.',
        { 'Retry-After': '10' },
      );
    });
    return this.configuration;
  }
}
