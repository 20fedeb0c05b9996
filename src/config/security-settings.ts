import { isSecretHash } from '../common/secret-hash';

/** The ways a caller can prove who they are; AUTH_MODE lists those accepted, or is `none`. */
export const AUTH_METHODS = ['basic', 'apiKey', 'oidc'] as const;
export type AuthMethod = (typeof AUTH_METHODS)[number];

/**
 * The AUTH_MODE setting as written: `none`, or a comma-separated list of AUTH_METHODS
 * (`apiKey,oidc` lets clients move from keys to tokens one at a time).
 */
export type AuthMode = string;

/** The methods AUTH_MODE accepts (empty for `none`); unknown names are dropped (validated at start-up). */
export function authMethodsOf(authMode: AuthMode): ReadonlySet<AuthMethod> {
  return new Set(
    authMode
      .split(',')
      .map((method) => method.trim())
      .filter((method): method is AuthMethod =>
        (AUTH_METHODS as readonly string[]).includes(method),
      ),
  );
}

/**
 * What kind of caller a principal is, and so who vouches for its name: `user` (a Basic user of
 * USERS, or ADMIN_USER), `key` (the principal of an API key), `oidc` (the OIDC_PRINCIPAL_CLAIM of a
 * token from OIDC_ISSUER), `client` (a client-credentials token of that issuer, named by its client
 * id). Rules name a principal as `<kind>:<name>` (docs/security.md#who-a-caller-is).
 */
export const PRINCIPAL_KINDS = ['user', 'key', 'oidc', 'client'] as const;
export type PrincipalKind = (typeof PRINCIPAL_KINDS)[number];

/** The kinds of caller AUTH_MODE lets in (ADMIN_USER aside, who is a global admin in every mode). */
export function principalKindsOf(authMode: AuthMode): PrincipalKind[] {
  const methods = authMethodsOf(authMode);
  return [
    ...(methods.has('basic') ? (['user'] as const) : []),
    ...(methods.has('apiKey') ? (['key'] as const) : []),
    ...(methods.has('oidc') ? (['oidc', 'client'] as const) : []),
  ];
}

/**
 * The kind a bare name in a rule (no `<kind>:`) stands for: the one kind AUTH_MODE lets in. Null
 * when AUTH_MODE lets in more than one (such a rule is refused) or none (rules are not asked).
 */
export function bareNameKind(authMode: AuthMode): PrincipalKind | null {
  const kinds = principalKindsOf(authMode);
  return kinds.length === 1 ? kinds[0] : null;
}

/** A rule's entry split: `user:alice` → kind and name; a bare name has kind null. */
export function parsePrincipalRule(
  entry: string,
): { kind: PrincipalKind | null; name: string } | null {
  const colon = entry.indexOf(':');
  if (colon < 0) {
    return entry === '' ? null : { kind: null, name: entry };
  }
  const kind = entry.slice(0, colon);
  const name = entry.slice(colon + 1);
  return (PRINCIPAL_KINDS as readonly string[]).includes(kind) && name !== ''
    ? { kind: kind as PrincipalKind, name }
    : null;
}

/**
 * What is wrong with a list of principals in a rule (`where` names it), one line or null: an
 * entry of no known kind, or a bare name while AUTH_MODE lets in more than one kind of caller,
 * which could then be any caller who can pick that name (a user name at the identity provider,
 * a client id).
 */
function principalListProblem(
  where: string,
  entries: readonly string[],
  authMode: AuthMode,
): string | null {
  const malformed = entries.filter((entry) => parsePrincipalRule(entry) === null);
  if (malformed.length > 0) {
    return `${where}: ${malformed.map((e) => JSON.stringify(e.slice(0, 70))).join(', ')} names no kind of caller: write ${PRINCIPAL_KINDS.map((k) => `${k}:<name>`).join(', ')} (docs/security.md#who-a-caller-is)`;
  }
  const kinds = principalKindsOf(authMode);
  const bare = entries.filter((entry) => parsePrincipalRule(entry)?.kind === null);
  if (bare.length === 0 || kinds.length <= 1) {
    return null;
  }
  const first = bare[0].slice(0, 70);
  return `${where}: ${bare.map((e) => JSON.stringify(e.slice(0, 70))).join(', ')} ${bare.length === 1 ? 'is a bare name' : 'are bare names'}, which AUTH_MODE=${authMode} lets ${kinds.length} kinds of caller carry: write the kind before each name (${kinds.map((k) => `${k}:${first}`).join(', ')}; docs/security.md#who-a-caller-is)`;
}

/** Algorithms a token may be signed with: asymmetric only (an HMAC key would be a shared secret). */
export const OIDC_ASYMMETRIC_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
] as const;

/** A configured user (AUTH_MODE=basic): `USERS={"alice":{"passwordHash":"scrypt$…","roles":["analyst"]}}`. */
export interface UserEntry {
  passwordHash: string;
  roles?: string[];
}

/**
 * A configured API key (AUTH_MODE=apiKey), keyed by its id: the client sends `<id>.<secret>`, so
 * a key is found without trying every hash. `API_KEYS={"k1":{"principal":"reporting","keyHash":"scrypt$…"}}`.
 */
export interface ApiKeyEntry {
  principal: string;
  keyHash: string;
  roles?: string[];
}

/** RSB's per-application rules (SPEC §10). Flags are off unless set to true. */
export interface ApplicationSecurity {
  userPrincipals?: string[];
  userRoles?: string[];
  adminPrincipals?: string[];
  adminRoles?: string[];
  functionCallAllowed?: boolean;
  scriptSubmissionAllowed?: boolean;
}

/** Principals and roles that are global admins, besides ADMIN_USER. */
export interface GlobalAdmins {
  principals?: string[];
  roles?: string[];
}

/**
 * The security part of the configuration (AppConfig has these fields): defined here so that
 * the configuration depends on security's types, not the other way round.
 */
export interface SecuritySettings {
  authMode: AuthMode;
  adminUser: string | null;
  adminPassword: string | null;
  users: Record<string, UserEntry>;
  apiKeys: Record<string, ApiKeyEntry>;
  globalAdmins: GlobalAdmins;
  applicationSecurity: Record<string, ApplicationSecurity>;
  authMaxFailures: number;
  authFailureWindowSeconds: number;
}

/** The OpenID Connect part of the configuration (AUTH_MODE with oidc; docs/security.md). */
export interface OidcSettings {
  authMode: AuthMode;
  /** AUTH_MODE with oidc: the issuer URL; its discovery document names the keys. */
  oidcIssuer: string | null;
  /** The audience (`aud`) a token must name: the API's client id or resource URI. */
  oidcAudience: string | null;
  /** The claim that names the caller; tokens without it are named by their `sub`. */
  oidcPrincipalClaim: string;
  /** Comma-separated dotted paths to claims that hold roles (lists of names, or one name). */
  oidcRolesClaims: string;
  /** Comma-separated signing algorithms accepted (asymmetric only). */
  oidcAlgorithms: string;
  oidcClockToleranceSeconds: number;
  /** Least time between two fetches of the issuer's keys caused by tokens naming an unknown key. */
  oidcJwksCooldownSeconds: number;
  /** The upload page's client at the provider (authorization code with PKCE); null: no sign-in. */
  oidcClientId: string | null;
  /** Its secret (a confidential client); null for a public client. */
  oidcClientSecret: string | null;
  /** Scopes the page asks for: its access token must be one for OIDC_AUDIENCE. */
  oidcScope: string;
  /** How long a sign-in on the page lasts. */
  oidcSessionHours: number;
}

/** A comma-separated setting as its non-empty items. */
export function listSetting(value: string): string[] {
  return value
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

function oidcProblems(config: OidcSettings): string[] {
  const problems: string[] = [];
  let issuer: URL | null = null;
  try {
    issuer = config.oidcIssuer ? new URL(config.oidcIssuer) : null;
  } catch {
    problems.push(`OIDC_ISSUER=${config.oidcIssuer}: must be a URL`);
  }
  if (config.oidcIssuer === null) {
    problems.push('OIDC_ISSUER: AUTH_MODE includes oidc; set the URL of the token issuer');
  } else if (
    issuer !== null &&
    issuer.protocol !== 'https:' &&
    !(issuer.protocol === 'http:' && LOOPBACK_HOSTS.has(issuer.hostname))
  ) {
    problems.push(
      `OIDC_ISSUER=${config.oidcIssuer}: must be an https:// URL (http only on localhost)`,
    );
  }
  if (!config.oidcAudience) {
    problems.push(
      "OIDC_AUDIENCE: AUTH_MODE includes oidc; set the audience the issuer writes into this API's tokens (its client id or resource URI)",
    );
  }
  if (!config.oidcPrincipalClaim) {
    problems.push('OIDC_PRINCIPAL_CLAIM: must name a claim (default preferred_username)');
  }
  if (config.oidcClientSecret && !config.oidcClientId) {
    problems.push('OIDC_CLIENT_SECRET: set OIDC_CLIENT_ID too (the client the secret belongs to)');
  }
  if (config.oidcClientId && !/(^|\s)openid(\s|$)/.test(config.oidcScope ?? '')) {
    problems.push(`OIDC_SCOPE=${config.oidcScope}: must include openid`);
  }
  const algorithms = listSetting(config.oidcAlgorithms ?? '');
  const refused = algorithms.filter(
    (alg) => !(OIDC_ASYMMETRIC_ALGORITHMS as readonly string[]).includes(alg),
  );
  if (algorithms.length === 0 || refused.length > 0) {
    problems.push(
      `OIDC_ALGORITHMS=${config.oidcAlgorithms}: ${refused.length > 0 ? `${refused.join(', ')} not accepted; ` : ''}list asymmetric algorithms only, from ${OIDC_ASYMMETRIC_ALGORITHMS.join(', ')} (HMAC and none are refused: a shared secret or no signature)`,
    );
  }
  return problems;
}

/**
 * Configuration keys whose values are secrets or hashes of secrets: never echoed in
 * configuration errors, masked wherever the configuration is shown.
 */
export const SECRET_CONFIG_KEYS: ReadonlySet<string> = new Set([
  'adminPassword',
  'users',
  'apiKeys',
  'databaseUrl',
  'databaseListenUrl',
  'smtpPassword',
  'auditPseudonymKey',
  'oidcClientSecret',
  'metricsToken',
  'signInSecret',
]);

/** A Basic user name: ADMIN_USER, and admins made at run time. */
export const USER_NAME = /^[^\s:]{1,128}$/;
const KEY_ID = /^[A-Za-z0-9_-]{1,64}$/;
const APPLICATION = /^\w{1,64}$/;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isNameList(value: unknown): boolean {
  return value === undefined || (Array.isArray(value) && value.every((v) => typeof v === 'string'));
}

/**
 * Problems in the security block, one line each, naming the variable and the entry but never
 * the value (hashes and passwords stay out of logs). Empty when the block is sound.
 */
export function securityConfigProblems(config: SecuritySettings & OidcSettings): string[] {
  const problems: string[] = [];
  const modes = listSetting(String(config.authMode ?? ''));
  const unknownModes = modes.filter((mode) => !(AUTH_METHODS as readonly string[]).includes(mode));
  if (
    !(modes.length === 1 && modes[0] === 'none') &&
    (modes.length === 0 || unknownModes.length > 0 || new Set(modes).size !== modes.length)
  ) {
    problems.push(
      `AUTH_MODE=${String(config.authMode)}: must be none, or a comma-separated list of ${AUTH_METHODS.join(', ')} (each once)`,
    );
  } else if (modes.includes('oidc')) {
    problems.push(...oidcProblems(config));
  }
  if ((config.adminUser === null) !== (config.adminPassword === null)) {
    problems.push('ADMIN_USER and ADMIN_PASSWORD: set both or neither');
  }
  if (config.adminUser !== null && !USER_NAME.test(config.adminUser)) {
    problems.push('ADMIN_USER: must be 1 to 128 characters without spaces or ":"');
  }
  for (const [name, entry] of Object.entries(config.users ?? {})) {
    if (!USER_NAME.test(name)) {
      problems.push(`USERS: "${name.slice(0, 40)}" is not a valid user name (no spaces or ":")`);
    } else if (!isObject(entry) || typeof entry.passwordHash !== 'string') {
      problems.push(`USERS: "${name}" needs a passwordHash (npm run hash-secret)`);
    } else if (!isSecretHash(entry.passwordHash)) {
      problems.push(
        `USERS: "${name}": passwordHash is not a scrypt$N$r$p$salt$hash value (npm run hash-secret)`,
      );
    } else if (!isNameList(entry.roles)) {
      problems.push(`USERS: "${name}": roles must be a list of names`);
    }
  }
  for (const [id, entry] of Object.entries(config.apiKeys ?? {})) {
    if (!KEY_ID.test(id)) {
      problems.push(
        `API_KEYS: "${id.slice(0, 40)}" is not a valid key id (letters, digits, _ and -)`,
      );
    } else if (
      !isObject(entry) ||
      typeof entry.principal !== 'string' ||
      !USER_NAME.test(entry.principal)
    ) {
      problems.push(`API_KEYS: "${id}" needs a principal (a name without spaces or ":")`);
    } else if (typeof entry.keyHash !== 'string' || !isSecretHash(entry.keyHash)) {
      problems.push(
        `API_KEYS: "${id}": keyHash is not a scrypt$N$r$p$salt$hash value (npm run hash-secret -- --api-key)`,
      );
    } else if (!isNameList(entry.roles)) {
      problems.push(`API_KEYS: "${id}": roles must be a list of names`);
    }
  }
  const admins = config.globalAdmins ?? {};
  if (!isNameList(admins.principals) || !isNameList(admins.roles)) {
    problems.push('GLOBAL_ADMINS: principals and roles must be lists of names');
  } else {
    const problem = principalListProblem(
      'GLOBAL_ADMINS: principals',
      admins.principals ?? [],
      String(config.authMode ?? ''),
    );
    if (problem !== null) {
      problems.push(problem);
    }
  }
  problems.push(
    ...applicationSecurityProblems(config.applicationSecurity ?? {}, String(config.authMode ?? '')),
  );
  return problems;
}

/** An APPLICATION_SECURITY entry's lists of names and its flags (the OpenAPI's ApplicationSecurityEntry names them). */
export const APPLICATION_SECURITY_LISTS = [
  'userPrincipals',
  'userRoles',
  'adminPrincipals',
  'adminRoles',
] as const;
export const APPLICATION_SECURITY_FLAGS = [
  'functionCallAllowed',
  'scriptSubmissionAllowed',
] as const;

/**
 * Problems in APPLICATION_SECURITY entries, one line each naming the application: the start-up
 * check and the run-time settings (PUT /admin/applications/{app}) use this one check.
 */
export function applicationSecurityProblems(
  applicationSecurity: Record<string, unknown>,
  authMode: AuthMode,
): string[] {
  const problems: string[] = [];
  for (const [app, rules] of Object.entries(applicationSecurity)) {
    if (!APPLICATION.test(app)) {
      problems.push(`APPLICATION_SECURITY: "${app.slice(0, 70)}" is not an application name`);
      continue;
    }
    if (!isObject(rules)) {
      problems.push(`APPLICATION_SECURITY: "${app}" must be an object`);
      continue;
    }
    const lists = APPLICATION_SECURITY_LISTS;
    const flags = APPLICATION_SECURITY_FLAGS;
    for (const key of Object.keys(rules)) {
      if (
        !(lists as readonly string[]).includes(key) &&
        !(flags as readonly string[]).includes(key)
      ) {
        problems.push(`APPLICATION_SECURITY: "${app}": unknown setting ${key}`);
      }
    }
    for (const key of lists) {
      if (!isNameList(rules[key])) {
        problems.push(`APPLICATION_SECURITY: "${app}": ${key} must be a list of names`);
      } else if (key === 'userPrincipals' || key === 'adminPrincipals') {
        const problem = principalListProblem(
          `APPLICATION_SECURITY: "${app}": ${key}`,
          (rules[key] as string[] | undefined) ?? [],
          authMode,
        );
        if (problem !== null) {
          problems.push(problem);
        }
      }
    }
    for (const key of flags) {
      if (rules[key] !== undefined && typeof rules[key] !== 'boolean') {
        problems.push(`APPLICATION_SECURITY: "${app}": ${key} must be true or false`);
      }
    }
  }
  return problems;
}
