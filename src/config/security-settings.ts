import { isSecretHash } from '../common/secret-hash';

export const AUTH_MODES = ['none', 'basic', 'apiKey'] as const;
export type AuthMode = (typeof AUTH_MODES)[number];

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
]);

const NAME = /^[^\s:]{1,128}$/;
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
export function securityConfigProblems(config: SecuritySettings): string[] {
  const problems: string[] = [];
  if ((config.adminUser === null) !== (config.adminPassword === null)) {
    problems.push('ADMIN_USER and ADMIN_PASSWORD: set both or neither');
  }
  if (config.adminUser !== null && !NAME.test(config.adminUser)) {
    problems.push('ADMIN_USER: must be 1 to 128 characters without spaces or ":"');
  }
  for (const [name, entry] of Object.entries(config.users ?? {})) {
    if (!NAME.test(name)) {
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
      !NAME.test(entry.principal)
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
  }
  problems.push(...applicationSecurityProblems(config.applicationSecurity ?? {}));
  return problems;
}

/**
 * Problems in APPLICATION_SECURITY entries, one line each naming the application: the start-up
 * check and the run-time settings (PUT /admin/applications/{app}) use this one check.
 */
export function applicationSecurityProblems(
  applicationSecurity: Record<string, unknown>,
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
    const lists = ['userPrincipals', 'userRoles', 'adminPrincipals', 'adminRoles'] as const;
    const flags = ['functionCallAllowed', 'scriptSubmissionAllowed'] as const;
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
