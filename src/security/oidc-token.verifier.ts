import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import {
  createLocalJWKSet,
  errors,
  jwtVerify,
  type JWTPayload,
  type JWTVerifyGetKey,
  type JWTHeaderParameters,
  type FlattenedJWSInput,
} from 'jose';
import { backOffDelay } from '../common/back-off';
import { SecurityConfig } from '../config/config-slices';
import { authMethodsOf, listSetting, type OidcSettings } from '../config/security-settings';
import { makePrincipal, type Principal } from './principal';

/** Longest token looked at: real access tokens are a few KB; anything longer is refused unread. */
export const MAX_TOKEN_CHARS = 16 * 1024;
/** Longest name a token may give its caller: as long as a user name (records keep it with its kind). */
const MAX_NAME_CHARS = 128;
/** Longest the service waits for the issuer's discovery document or keys. */
const FETCH_TIMEOUT_MS = 5000;
/** Largest discovery document or key set read from the issuer. */
const MAX_DOCUMENT_BYTES = 1024 * 1024;
/** Keys are fetched again this often even when every token names a known key (removed keys go). */
const KEYS_REFRESH_MS = 10 * 60_000;
/**
 * Discovery retried after at most this long at first, doubling up to DISCOVERY_RETRY_MAX_MS, each
 * wait drawn between half and all of that (backOffDelay).
 */
const DISCOVERY_RETRY_MIN_MS = 1000;
const DISCOVERY_RETRY_MAX_MS = 60_000;

/** Raised when the issuer's keys are not known yet: the token cannot be checked (a 401 all the same). */
class KeysUnavailable extends Error {}

/** A token's check: the principal it names, or why it is refused (words fit for error_description). */
export type TokenVerification = { principal: Principal } | { refused: string };

/**
 * Verifies OpenID Connect access tokens (JWTs) with the issuer's published keys (docs/security.md).
 * The issuer's discovery document is read at start-up, and again with back-off until it answers.
 * The keys (JWKS) are kept in memory: fetched again when a token names a key id not among them
 * (at most once per OIDC_JWKS_COOLDOWN_SECONDS, so unknown ids cannot make us hammer the issuer)
 * and every ten minutes. A failed fetch keeps the keys already held, so tokens keep working while
 * the issuer is unreachable. (jose's createRemoteJWKSet drops to refusing every token once its
 * cache is older than cacheMaxAge and the issuer does not answer, hence this small store around
 * createLocalJWKSet.)
 */
@Injectable()
export class OidcTokenVerifier implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('OIDC');
  private readonly settings: OidcSettings;
  readonly enabled: boolean;
  private readonly issuer: string;
  private readonly rolesClaims: string[][];
  private readonly algorithms: string[];
  private jwksUri: URL | null = null;
  private keys: JWTVerifyGetKey | null = null;
  /** When keys were last asked for because of a token (ms since epoch): the rate limit. */
  private lastDemandFetch = Number.NEGATIVE_INFINITY;
  private pendingFetch: Promise<void> | null = null;
  private refreshTimer: NodeJS.Timeout | null = null;
  private discoveryTimer: NodeJS.Timeout | null = null;
  /** Discovery attempts that failed: the back-off's attempt number. */
  private discoveryFailures = 0;
  private stopped = false;

  constructor(config: SecurityConfig) {
    this.settings = config;
    this.enabled = authMethodsOf(config.authMode).has('oidc');
    this.issuer = config.oidcIssuer ?? '';
    this.rolesClaims = listSetting(config.oidcRolesClaims ?? '').map((path) => path.split('.'));
    this.algorithms = listSetting(config.oidcAlgorithms ?? '');
  }

  async onApplicationBootstrap(): Promise<void> {
    if (!this.enabled) {
      return;
    }
    // One attempt before the service answers, so tokens work from its first request; an issuer
    // that does not answer yet does not keep the service from starting (retried with back-off).
    await this.fetchKeys().catch((error: unknown) => {
      this.logger.warn(
        `the issuer ${this.issuer} did not answer (${messageOf(error)}); tokens are refused until it does, retrying`,
      );
      this.scheduleDiscovery();
    });
    this.refreshTimer = setInterval(() => {
      void this.fetchKeys().catch((error: unknown) =>
        this.logger.warn(`keeping the keys held: refreshing them failed (${messageOf(error)})`),
      );
    }, KEYS_REFRESH_MS);
    this.refreshTimer.unref();
  }

  onApplicationShutdown(): void {
    this.stopped = true;
    if (this.refreshTimer) {
      clearInterval(this.refreshTimer);
    }
    if (this.discoveryTimer) {
      clearTimeout(this.discoveryTimer);
    }
  }

  /** Checks a bearer token; never throws for anything a client can send. */
  async verify(token: string): Promise<TokenVerification> {
    if (token.length > MAX_TOKEN_CHARS) {
      return { refused: 'the token is too long' };
    }
    try {
      const { payload } = await jwtVerify(token, (header, jws) => this.keyFor(header, jws), {
        issuer: this.issuer,
        audience: this.settings.oidcAudience ?? '',
        algorithms: this.algorithms,
        clockTolerance: this.settings.oidcClockToleranceSeconds,
        requiredClaims: ['exp'],
      });
      return this.principalOf(payload);
    } catch (error) {
      return { refused: this.reasonOf(error) };
    }
  }

  /**
   * The caller a token names: `oidc:<OIDC_PRINCIPAL_CLAIM>`, or, for a machine token without that
   * claim (client-credentials grant), `client:<client id>`: a client id someone registers at the
   * provider is never taken for a user's name. A user's token without the claim is refused rather
   * than named by its `sub`, which another user's name could spell.
   */
  private principalOf(payload: JWTPayload): TokenVerification {
    const named = claimAt(payload, this.settings.oidcPrincipalClaim.split('.'));
    let kind: 'oidc' | 'client' = 'oidc';
    let name = typeof named === 'string' && named !== '' ? named : undefined;
    if (name === undefined) {
      // RFC 9068 sets a machine token's sub to the client id; Entra ID marks it idtyp=app and
      // names the client in azp.
      const client = [payload.client_id, payload.azp, payload.appid].find(
        (value): value is string => typeof value === 'string' && value !== '',
      );
      const machine =
        payload.idtyp === 'app' ||
        (payload.sub !== undefined &&
          (payload.sub === payload.client_id || payload.sub === payload.azp));
      if (!machine || client === undefined) {
        return {
          refused: `the token has no ${this.settings.oidcPrincipalClaim} claim (OIDC_PRINCIPAL_CLAIM) and is no client's own token`,
        };
      }
      kind = 'client';
      name = client;
    }
    if (name.length > MAX_NAME_CHARS) {
      return { refused: `the token's name is longer than ${MAX_NAME_CHARS} characters` };
    }
    const roles = new Set<string>();
    for (const path of this.rolesClaims) {
      const value = claimAt(payload, path);
      for (const role of Array.isArray(value) ? value : [value]) {
        if (typeof role === 'string' && role !== '') {
          roles.add(role);
        }
      }
    }
    return { principal: makePrincipal(kind, name, [...roles]) };
  }

  /** The key for a token: from the keys held, fetching them again for an unknown key id. */
  private async keyFor(header: JWTHeaderParameters, jws: FlattenedJWSInput) {
    if (this.keys === null) {
      await this.fetchOnDemand();
    }
    if (this.keys === null) {
      throw new KeysUnavailable();
    }
    try {
      return await this.keys(header, jws);
    } catch (error) {
      if (!(error instanceof errors.JWKSNoMatchingKey) || !(await this.fetchOnDemand())) {
        throw error;
      }
      return this.keys(header, jws);
    }
  }

  /** Fetches the keys unless that was done for a token within the cooldown; true if fetched now. */
  private async fetchOnDemand(): Promise<boolean> {
    const now = Date.now();
    if (this.pendingFetch === null && now - this.lastDemandFetch < this.cooldownMs()) {
      return false;
    }
    this.lastDemandFetch = now;
    try {
      await this.fetchKeys();
      return true;
    } catch (error) {
      this.logger.warn(`keeping the keys held: fetching them failed (${messageOf(error)})`);
      return false;
    }
  }

  private cooldownMs(): number {
    return this.settings.oidcJwksCooldownSeconds * 1000;
  }

  /** Discovery (once it has succeeded, never again) and the keys; one fetch at a time. */
  private fetchKeys(): Promise<void> {
    this.pendingFetch ??= (async () => {
      try {
        this.jwksUri ??= await this.discover();
        const jwks = await fetchJson(this.jwksUri);
        this.keys = createLocalJWKSet(jwks as Parameters<typeof createLocalJWKSet>[0]);
      } finally {
        this.pendingFetch = null;
      }
    })();
    return this.pendingFetch;
  }

  private async discover(): Promise<URL> {
    const document = await fetchJson(
      new URL(`${this.issuer.replace(/\/$/, '')}/.well-known/openid-configuration`),
    );
    if (!isRecord(document) || document.issuer !== this.issuer) {
      throw new Error(
        `the discovery document names issuer ${JSON.stringify(isRecord(document) ? document.issuer : undefined)}, not OIDC_ISSUER=${this.issuer}: set OIDC_ISSUER to exactly the issuer the provider names`,
      );
    }
    if (typeof document.jwks_uri !== 'string') {
      throw new Error('the discovery document has no jwks_uri');
    }
    const uri = new URL(document.jwks_uri);
    if (uri.protocol !== 'https:' && new URL(this.issuer).protocol === 'https:') {
      throw new Error(`the discovery document's jwks_uri ${uri.href} is not https`);
    }
    this.logger.log(`issuer ${this.issuer}: keys at ${uri.href}`);
    return uri;
  }

  private scheduleDiscovery(): void {
    if (this.stopped) {
      return;
    }
    this.discoveryFailures += 1;
    const delay = backOffDelay(
      this.discoveryFailures,
      DISCOVERY_RETRY_MIN_MS,
      DISCOVERY_RETRY_MAX_MS,
    );
    this.discoveryTimer = setTimeout(() => {
      this.discoveryTimer = null;
      if (this.keys !== null) {
        return;
      }
      this.fetchKeys().then(
        () => this.logger.log(`the issuer ${this.issuer} answers: tokens are accepted`),
        () => this.scheduleDiscovery(),
      );
    }, delay);
    this.discoveryTimer.unref();
  }

  /** Words for error_description: what is wrong with the token, never a secret or a stack. */
  private reasonOf(error: unknown): string {
    if (error instanceof KeysUnavailable) {
      return "the issuer's signing keys are not available yet";
    }
    if (error instanceof errors.JWTExpired) {
      return 'the token has expired';
    }
    if (error instanceof errors.JWTClaimValidationFailed) {
      switch (error.claim) {
        case 'nbf':
        case 'iat':
          return 'the token is not valid yet';
        case 'iss':
          return 'the token comes from another issuer';
        case 'aud':
          return 'the token is meant for another audience';
        default:
          return `the token's ${error.claim} claim is missing or not valid`;
      }
    }
    if (error instanceof errors.JOSEAlgNotAllowed) {
      return "the token's signing algorithm is not accepted";
    }
    if (error instanceof errors.JWSSignatureVerificationFailed) {
      return "the token's signature is not valid";
    }
    if (error instanceof errors.JWKSNoMatchingKey) {
      return 'the token names a signing key the issuer does not publish';
    }
    if (error instanceof errors.JOSEError) {
      return 'the token is malformed';
    }
    this.logger.warn(`a token could not be checked: ${messageOf(error)}`);
    return 'the token could not be checked';
  }
}

/** The value at a dotted path of claims (`realm_access.roles`), undefined when absent. */
function claimAt(payload: JWTPayload, path: readonly string[]): unknown {
  let value: unknown = payload;
  for (const key of path) {
    if (!isRecord(value) || !Object.hasOwn(value, key)) {
      return undefined;
    }
    value = value[key];
  }
  return value;
}

/** An issuer's JSON document, read no further than MAX_DOCUMENT_BYTES and FETCH_TIMEOUT_MS. */
export async function fetchJson(url: URL): Promise<unknown> {
  const response = await fetch(url, {
    signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
    headers: { accept: 'application/json' },
    redirect: 'error',
  });
  if (!response.ok) {
    throw new Error(`${url.href} answered ${response.status}`);
  }
  // Read no more than the bound: a provider that answers without end must not fill the heap.
  const declared = Number(response.headers.get('content-length') ?? 0);
  if (declared > MAX_DOCUMENT_BYTES) {
    await response.body?.cancel();
    throw new Error(`${url.href} answered more than ${MAX_DOCUMENT_BYTES} bytes`);
  }
  if (!response.body) {
    throw new Error(`${url.href} answered no document`);
  }
  const pieces: Uint8Array[] = [];
  let size = 0;
  for await (const piece of response.body as AsyncIterable<Uint8Array>) {
    size += piece.byteLength;
    if (size > MAX_DOCUMENT_BYTES) {
      // Leaving the loop cancels the stream.
      throw new Error(`${url.href} answered more than ${MAX_DOCUMENT_BYTES} bytes`);
    }
    pieces.push(piece);
  }
  return JSON.parse(Buffer.concat(pieces).toString('utf8')) as unknown;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
