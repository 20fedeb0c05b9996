import { createHash } from 'node:crypto';
import { Injectable, Logger, Optional } from '@nestjs/common';
import type { Request } from 'express';
import { SecurityConfig } from '../config/config-slices';
import { rawHeaderValues } from '../common/application-name';
import { addressBucket, AuthFailureLimiter } from './auth-failure-limiter';
import { makePrincipal, type Principal } from './principal';
import { hashSecret, plainSecretsEqual, randomSecret, verifySecret } from '../common/secret-hash';
import { authMethodsOf, type AuthMethod, type SecuritySettings } from '../config/security-settings';
import { AdminAccountsService } from './admin-accounts.service';
import { ApiKeysService } from '../api-keys/api-keys.service';
import { OidcTokenVerifier } from './oidc-token.verifier';

/** The header that carries an API key (or `Authorization: Bearer <key>`). Never a query parameter: URLs end up in logs. */
export const API_KEY_HEADER = 'X-SVC-API-Key';

export type Authentication =
  /** No credentials were sent. */
  | { kind: 'anonymous' }
  | { kind: 'authenticated'; principal: Principal }
  /**
   * Credentials were sent and are wrong, malformed or of a kind this mode does not take;
   * `bearer`: they came as `Authorization: Bearer` (the 401 then says error="invalid_token").
   */
  | { kind: 'failed'; reason: string; bearer: boolean }
  /** Too many failures from this address: not even checked. */
  | { kind: 'throttled'; retryAfterSeconds: number };

/** A successful check is remembered this long, so a busy client does not pay scrypt on every request. */
const VERIFIED_TTL_MS = 60_000;
const MAX_VERIFIED = 10_000;

type Credentials =
  | { scheme: 'basic'; name: string; secret: string }
  | { scheme: 'apiKey'; id: string; secret: string }
  | { scheme: 'oidc'; token: string };

/** A JWS in compact form: three base64url parts (an API key `<id>.<secret>` has two). */
const COMPACT_JWS = /^[\w-]+\.[\w-]*\.[\w-]*$/;

/**
 * Turns a request's credentials into a principal: HTTP Basic for configured users (basic mode)
 * and for ADMIN_USER (every mode), API keys in apiKey mode, OpenID Connect access tokens in oidc
 * mode (OidcTokenVerifier). Failed attempts count against the
 * client's address (AuthFailureLimiter); hashes are checked in constant time.
 */
@Injectable()
export class AuthenticationService {
  private readonly logger = new Logger('Security');
  private readonly settings: SecuritySettings;
  private readonly limiter: AuthFailureLimiter;
  private readonly verified = new Map<string, { principal: Principal; expires: number }>();
  private dummyHash: Promise<string> | undefined;
  private readonly methods: ReadonlySet<AuthMethod>;

  constructor(
    config: SecurityConfig,
    private readonly tokens: OidcTokenVerifier,
    /** Keys made at run time (ApiKeysModule, API nodes only): looked up when API_KEYS lacks the id. */
    @Optional() private readonly storedKeys?: ApiKeysService,
    /** Admins made at run time (AdminAccountsModule, API nodes only): Basic, in every mode. */
    @Optional() private readonly adminAccounts?: AdminAccountsService,
  ) {
    this.settings = config;
    this.methods = authMethodsOf(config.authMode);
    this.limiter = new AuthFailureLimiter(
      config.authMaxFailures,
      config.authFailureWindowSeconds * 1000,
    );
  }

  async authenticate(req: Request): Promise<Authentication> {
    const credentials = this.credentialsOf(req);
    if (credentials === null) {
      return { kind: 'anonymous' };
    }
    const address = req.ip ?? req.socket.remoteAddress ?? 'unknown';
    const bucket = addressBucket(address);
    const retryAfterSeconds = this.limiter.retryAfterSeconds(bucket);
    if (retryAfterSeconds > 0) {
      return { kind: 'throttled', retryAfterSeconds };
    }
    const outcome =
      typeof credentials === 'string'
        ? credentials
        : credentials.scheme === 'oidc'
          ? await this.verifyToken(credentials.token)
          : await this.verifyCached(credentials);
    if (typeof outcome === 'string') {
      this.limiter.recordFailure(bucket);
      // The address and the reason only: never the name typed (it may be a password) or the secret.
      this.logger.warn(`authentication failed from ${address}: ${outcome}`);
      return { kind: 'failed', reason: outcome, bearer: this.sentBearer(req) };
    }
    return { kind: 'authenticated', principal: outcome };
  }

  /**
   * The request's credentials checked again, as they would be now (a key revoked since, a token
   * expired since): its principal, null when it sent none, or why they no longer hold. Counts no
   * failure and logs nothing: the caller authenticated once already (HeldRights).
   */
  async recheck(req: Request): Promise<Principal | null | { refused: string }> {
    const credentials = this.credentialsOf(req);
    if (credentials === null) {
      return null;
    }
    const outcome =
      typeof credentials === 'string'
        ? credentials
        : credentials.scheme === 'oidc'
          ? await this.verifyToken(credentials.token)
          : await this.verifyCached(credentials);
    return typeof outcome === 'string' ? { refused: outcome } : outcome;
  }

  /** The credentials sent, null when none, or why they cannot be used. */
  private credentialsOf(req: Request): Credentials | string | null {
    const authorization = rawHeaderValues(req, 'authorization');
    const apiKeys = rawHeaderValues(req, API_KEY_HEADER);
    if (authorization.length + apiKeys.length === 0) {
      return null;
    }
    if (authorization.length + apiKeys.length > 1) {
      return 'more than one credential was sent';
    }
    if (apiKeys.length === 1) {
      return this.apiKeyCredentials(apiKeys[0].trim());
    }
    const [scheme, ...rest] = authorization[0].trim().split(/\s+/);
    const value = rest.join(' ');
    switch (scheme.toLowerCase()) {
      case 'basic': {
        const decoded = Buffer.from(value, 'base64').toString('utf8');
        const colon = decoded.indexOf(':');
        return colon > 0
          ? { scheme: 'basic', name: decoded.slice(0, colon), secret: decoded.slice(colon + 1) }
          : 'malformed Basic credentials';
      }
      case 'bearer':
        // Both may be accepted at once (AUTH_MODE=apiKey,oidc): the shape tells them apart.
        return this.methods.has('oidc') && COMPACT_JWS.test(value)
          ? { scheme: 'oidc', token: value }
          : this.apiKeyCredentials(value);
      default:
        return 'unsupported authorization scheme';
    }
  }

  private apiKeyCredentials(key: string): Credentials | string {
    if (!this.methods.has('apiKey')) {
      return this.methods.has('oidc')
        ? 'the bearer token is not a JWT'
        : 'API keys are not accepted in this authentication mode';
    }
    const dot = key.indexOf('.');
    return dot > 0
      ? { scheme: 'apiKey', id: key.slice(0, dot), secret: key.slice(dot + 1) }
      : 'malformed API key';
  }

  /** Not cached: a signature check costs microseconds, and a token's validity changes with time. */
  private async verifyToken(token: string): Promise<Principal | string> {
    const outcome = await this.tokens.verify(token);
    return 'principal' in outcome ? outcome.principal : outcome.refused;
  }

  private sentBearer(req: Request): boolean {
    const [authorization] = rawHeaderValues(req, 'authorization');
    return authorization !== undefined && /^\s*bearer\s/i.test(authorization);
  }

  private async verifyCached(
    credentials: Exclude<Credentials, { scheme: 'oidc' }>,
  ): Promise<Principal | string> {
    if (
      credentials.scheme === 'apiKey' &&
      this.storedKeys !== undefined &&
      !Object.hasOwn(this.settings.apiKeys, credentials.id)
    ) {
      // Not cached here: a revoked key must be refused at once, and ApiKeysService caches
      // under the revocation notifications.
      const stored = await this.storedKeys.check(credentials.id, credentials.secret);
      if (stored === null || 'refused' in stored) {
        // The scrypt a configured key's wrong secret costs: no refusal tells which ids exist.
        await this.spendDummyHash(credentials.secret);
        return stored?.refused ?? 'unknown or wrong API key';
      }
      return makePrincipal('key', stored.principal, stored.roles);
    }
    const cacheKey = createHash('sha256')
      .update(
        credentials.scheme === 'basic'
          ? `basic\0${credentials.name}\0${credentials.secret}`
          : `apiKey\0${credentials.id}\0${credentials.secret}`,
      )
      .digest('base64');
    const now = Date.now();
    const hit = this.verified.get(cacheKey);
    if (hit && hit.expires > now) {
      return hit.principal;
    }
    const outcome = await this.verify(credentials);
    if (typeof outcome !== 'string') {
      if (this.verified.size >= MAX_VERIFIED) {
        this.verified.clear();
      }
      this.verified.set(cacheKey, { principal: outcome, expires: now + VERIFIED_TTL_MS });
    }
    return outcome;
  }

  private async verify(
    credentials: Exclude<Credentials, { scheme: 'oidc' }>,
  ): Promise<Principal | string> {
    const { adminUser, adminPassword } = this.settings;
    if (credentials.scheme === 'apiKey') {
      const entry = Object.hasOwn(this.settings.apiKeys, credentials.id)
        ? this.settings.apiKeys[credentials.id]
        : undefined;
      // An unknown id costs the same hash as a known one with a wrong secret.
      if (entry === undefined) {
        await this.spendDummyHash(credentials.secret);
        return 'unknown or wrong API key';
      }
      if (!(await verifySecret(credentials.secret, entry.keyHash))) {
        return 'unknown or wrong API key';
      }
      return makePrincipal('key', entry.principal, entry.roles ?? []);
    }
    if (adminUser !== null && adminPassword !== null && credentials.name === adminUser) {
      return plainSecretsEqual(credentials.secret, adminPassword)
        ? makePrincipal('user', adminUser, [], true)
        : 'wrong user name or password';
    }
    // A user of USERS keeps the name: an admin made at run time never shadows one.
    const account = Object.hasOwn(this.settings.users, credentials.name)
      ? null
      : await this.adminAccounts?.check(credentials.name, credentials.secret);
    if (account !== undefined && account !== null) {
      if (account) {
        return makePrincipal('user', credentials.name, [], true);
      }
      // A wrong password costs what an unknown name does: timing does not tell admins' names.
      return this.spendDummyHash(credentials.secret).then(() => 'wrong user name or password');
    }
    const user =
      this.methods.has('basic') && Object.hasOwn(this.settings.users, credentials.name)
        ? this.settings.users[credentials.name]
        : undefined;
    // An unknown name costs the same hash as a known one: timing does not tell which names exist.
    const ok =
      user === undefined
        ? await this.spendDummyHash(credentials.secret)
        : await verifySecret(credentials.secret, user.passwordHash);
    return ok && user !== undefined
      ? makePrincipal('user', credentials.name, user.roles ?? [])
      : 'wrong user name or password';
  }

  /**
   * One scrypt check at the default cost (SCRYPT_DEFAULTS) against a hash of nothing anyone
   * knows: what a refusal costs when there is no stored hash to check. Always false.
   */
  private async spendDummyHash(secret: string): Promise<false> {
    await verifySecret(secret, await (this.dummyHash ??= hashSecret(randomSecret())));
    return false;
  }
}
