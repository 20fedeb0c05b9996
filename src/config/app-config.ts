import 'reflect-metadata';
import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { plainToInstance } from 'class-transformer';
import {
  IsArray,
  IsBoolean,
  IsIn,
  IsInt,
  IsObject,
  IsOptional,
  IsString,
  IsUrl,
  Matches,
  Max,
  Min,
  MinLength,
  validateSync,
  ValidationError,
} from 'class-validator';
import {
  SECRET_CONFIG_KEYS,
  securityConfigProblems,
  type ApiKeyEntry,
  type ApplicationSecurity,
  type AuthMode,
  type GlobalAdmins,
  type OidcSettings,
  type SecuritySettings,
  type UserEntry,
} from './security-settings';
import { applicationSettingsProblems, type ApplicationSettings } from './application-settings';
import { emailAccountsOf, type EmailAccount } from './mail-settings';
import { readConfigFiles } from './config-files';
import { PROJECT_ROOT_DIR, SERVICE_VERSION } from './project-root';

/** The origins CORS_ORIGINS lets call the API from a browser; empty when cross-origin is off. */
export function corsOriginsOf(config: Pick<AppConfig, 'corsOrigins'>): string[] {
  return (config.corsOrigins ?? '')
    .split(',')
    .map((origin) => origin.trim())
    .filter((origin) => origin !== '');
}

/**
 * The CRAN-like repositories R_REPOSITORIES lists, in order, each without a trailing slash;
 * empty when none is set.
 */
export function rRepositoriesOf(config: Pick<AppConfig, 'rRepositories'>): string[] {
  return (config.rRepositories ?? '')
    .split(',')
    .map((url) => url.trim().replace(/\/+$/, ''))
    .filter((url) => url !== '');
}

/** TRUST_PROXY as Express's `trust proxy` takes it: a boolean, a hop count, or address rules. */
export function trustProxyOf(config: Pick<AppConfig, 'trustProxy'>): boolean | number | string[] {
  const value = config.trustProxy.trim().toLowerCase();
  if (value === 'false' || value === '') {
    return false;
  }
  if (value === 'true') {
    return true;
  }
  if (/^\d+$/.test(value)) {
    return Number(value);
  }
  return value.split(',').map((entry) => entry.trim());
}

const PROXY_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** Why TRUST_PROXY cannot be used, or null. */
function trustProxyProblem(config: Pick<AppConfig, 'trustProxy'>): string | null {
  const rule = trustProxyOf(config);
  if (!Array.isArray(rule)) {
    return null;
  }
  const bad = rule.filter((entry) => {
    if (PROXY_NAMES.has(entry)) {
      return false;
    }
    const [address, prefix] = entry.split('/');
    return isIP(address) === 0 || (prefix !== undefined && !/^\d{1,3}$|^[\d.]+$/.test(prefix));
  });
  return bad.length === 0
    ? null
    : `TRUST_PROXY=${config.trustProxy}: ${bad.join(', ')} is not an address, a subnet (10.0.0.0/8) or one of loopback, linklocal, uniquelocal; or give false, true or a number of hops`;
}

export const METRICS_ACCESS_MODES = ['token', 'open'] as const;

export const ROLES = ['all', 'api', 'worker'] as const;
export type Role = (typeof ROLES)[number];
export const R_ENGINES = ['auto', 'native', 'webr'] as const;
export type REngineSetting = (typeof R_ENGINES)[number];
export const R_SCRIPT_MODES = ['fork', 'spawn'] as const;
/** shared: one webR instance for all applications; per-application: one each (docs/security.md). */
export const WEBR_INSTANCE_MODES = ['shared', 'per-application'] as const;
/** bwrap: R in a bubblewrap sandbox; auto: bwrap when it works; none: no sandbox. */
export const R_SANDBOX_SETTINGS = ['auto', 'bwrap', 'none'] as const;
export type RSandboxSetting = (typeof R_SANDBOX_SETTINGS)[number];
/** none: DATABASE_URL reaches PostgreSQL directly; pgbouncer: through PgBouncer (transaction mode). */
export const DATABASE_POOLERS = ['none', 'pgbouncer'] as const;
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/**
 * The effective configuration: `config/default.json`, then `config/local.json` if present,
 * then environment variables. Every key has one environment name, the key in UPPER_SNAKE_CASE
 * (`jobTimeoutSeconds` -> `JOB_TIMEOUT_SECONDS`); SPEC §11 fixes the names of the first few.
 */
export class AppConfig implements SecuritySettings, OidcSettings {
  @IsInt() @Min(0) @Max(65535) port!: number;
  @IsOptional()
  @Matches(/^postgres(ql)?:\/\//, { message: 'must be a postgres:// URL' })
  databaseUrl!: string | null;
  /**
   * A direct connection to the same database, used only for LISTEN (a session, which a
   * transaction-mode pooler cannot keep); null: DATABASE_URL, unless DATABASE_POOLER says it
   * goes through a pooler, then the nodes poll.
   */
  @IsOptional()
  @Matches(/^postgres(ql)?:\/\//, { message: 'must be a postgres:// URL' })
  databaseListenUrl!: string | null;
  /** What DATABASE_URL goes through: none, or pgbouncer in transaction-pooling mode. */
  @IsIn(DATABASE_POOLERS) databasePooler!: (typeof DATABASE_POOLERS)[number];
  @IsString() dataDir!: string;
  @IsOptional()
  @IsUrl({ require_tld: false, protocols: ['http', 'https'], require_protocol: true })
  publicBaseUrl!: string | null;
  /**
   * Origins of browser pages that may call the API across origins, comma-separated
   * (`https://app.example.com,http://localhost:3000`); null: no cross-origin access.
   */
  @IsOptional()
  @Matches(/^\s*https?:\/\/[^\s/,]+\s*(,\s*https?:\/\/[^\s/,]+\s*)*$/, {
    message: 'must be a comma-separated list of origins such as https://app.example.com',
  })
  corsOrigins!: string | null;
  /** The address the HTTP server (and a worker's metrics server) binds; 0.0.0.0: every interface. */
  @IsString()
  @Matches(/^[A-Za-z0-9.:-]{1,253}$/, { message: 'must be an IP address or a host name' })
  host!: string;
  /**
   * Which peers' X-Forwarded-Host / -Proto / -For are followed (Express's `trust proxy`): false,
   * true, a number of hops, or addresses and subnets, comma-separated (`loopback,10.0.0.0/8`).
   */
  @IsString() trustProxy!: string;
  @IsIn(ROLES) role!: Role;
  @IsIn(LOG_LEVELS) logLevel!: string;
  /** One line per HTTP request (context Access, level info); false: none. */
  @IsBoolean() accessLog!: boolean;
  /** auto: readable lines on a terminal, JSON lines otherwise (log collectors). */
  @IsIn(LOG_FORMATS) logFormat!: (typeof LOG_FORMATS)[number];
  @IsBoolean() migrationsRun!: boolean;
  @IsIn(R_ENGINES) rEngine!: REngineSetting;
  @IsOptional() @IsString() rHome!: string | null;
  @IsOptional() @IsString() rscriptPath!: string | null;
  @IsInt() @Min(0) rMemoryLimitMb!: number;
  /** bwrap: R in a bubblewrap sandbox; auto: bwrap when it works; none: no sandbox. */
  @IsIn(R_SANDBOX_SETTINGS) rSandbox!: RSandboxSetting;
  /** CPU seconds of one job (0: the time limit times the cores, plus 5). */
  @IsInt() @Min(0) rCpuLimitSeconds!: number;
  /** Processes and threads of one job's sandbox (0: no limit). */
  @IsInt() @Min(0) rMaxProcesses!: number;
  /** Largest file one job may write, in MiB (0: no limit). */
  @IsInt() @Min(0) rMaxFileMb!: number;
  /** Bytes one job may write in all (working and temporary directory), in MiB (0: no limit). */
  @IsInt() @Min(0) rMaxWriteMb!: number;
  @IsInt() @Min(0) @Max(256) scriptSlots!: number;
  @IsInt() @Min(0) @Max(256) functionSlots!: number;
  @IsObject() applicationSlots!: Record<string, number>;
  /** Per-application settings other than access rules: see application-settings.ts. */
  @IsObject() applicationSettings!: Record<string, ApplicationSettings>;
  @IsInt() @Min(1) jobTimeoutSeconds!: number;
  @IsInt() @Min(1) @Max(100) maxAttempts!: number;
  @IsInt() @Min(0) retryBackoffMs!: number;
  @IsInt() @Min(1) leaseSeconds!: number;
  @IsInt() @Min(1) heartbeatSeconds!: number;
  @IsInt() @Min(10) pollIntervalMs!: number;
  /** How often drop directories are scanned (inbox, claims of dead nodes, results to write). */
  @IsInt() @Min(100) dropPollIntervalMs!: number;
  @IsInt() @Min(0) shutdownGraceSeconds!: number;
  /** After SIGTERM, the process exits by then even if the database does not answer. */
  @IsInt() @Min(1) shutdownTimeoutSeconds!: number;
  /** Connections of a node's pool on a database server (the embedded database has one). */
  @IsInt() @Min(1) databasePoolSize!: number;
  @IsInt() @Min(1) maxRequestBytes!: number;
  /** R output kept per job in its log (GET /jobs/{app}/{jobId}/log); the rest is cut. */
  @IsInt() @Min(0) jobLogMaxBytes!: number;
  @IsInt() @Min(1) zipMaxEntries!: number;
  @IsInt() @Min(1) zipMaxUncompressedBytes!: number;
  @IsInt() @Min(1) zipMaxCompressionRatio!: number;
  @IsInt() @Min(0) resultRetentionHours!: number;
  // job callbacks (docs/api.md#job-callbacks)
  /** How long a job's callback is retried after the job ended before it is marked failed. */
  @IsInt() @Min(0) callbackRetrySeconds!: number;
  /** The delay before the first retry; it doubles with each failed attempt. */
  @IsInt() @Min(1) callbackFirstRetryMs!: number;
  /** The longest delay between two attempts. */
  @IsInt() @Min(1) callbackMaxRetryDelaySeconds!: number;
  /** Time limit of one delivery attempt (connect, send, answer). */
  @IsInt() @Min(1) @Max(300) callbackTimeoutSeconds!: number;
  /** Longest `?wait=N` a client may ask for on GET results and job status, in seconds. */
  @IsInt() @Min(1) @Max(3600) resultWaitMaxSeconds!: number;
  /** Event streams (live logs, the console's events) one caller may hold open on a node at once. */
  @IsInt() @Min(1) eventStreamsPerCaller!: number;
  /**
   * Seconds a client may leave what the node writes to it untaken (an event stream, a download,
   * any answer) before its connection is cut (docs/security.md, the HTTP edge).
   */
  @IsInt() @Min(1) @Max(3600) streamSlowReaderSeconds!: number;
  /** Days a finished job's usage record is kept for the usage statistics (0: kept). */
  @IsInt() @Min(0) usageRetentionDays!: number;
  /** Days an audit row is kept (0: kept); deleted by the supervisor pass (docs/security.md#audit-trail). */
  @IsInt() @Min(0) auditRetentionDays!: number;
  /** Store a keyed hash of each principal in the audit trail instead of the name. */
  @IsBoolean() auditPseudonymize!: boolean;
  /** The key of that hash (HMAC-SHA256); required with auditPseudonymize. */
  @IsOptional() @IsString() auditPseudonymKey!: string | null;
  @IsString() catalogDir!: string;
  /**
   * The CRAN-like repositories applications' environments take packages from, comma-separated:
   * http(s):// URLs, or file:// URLs of absolute directories (docs/environments.md); null: none
   * (only the applications' uploaded packages).
   */
  @IsOptional()
  @Matches(
    /^\s*(https?:\/\/[^\s,]+|file:\/\/\/[^\s,]*)\s*(,\s*(https?:\/\/[^\s,]+|file:\/\/\/[^\s,]*)\s*)*$/,
    {
      message:
        'must be a comma-separated list of http(s):// URLs or file:// URLs of absolute directories (file:///srv/cran)',
    },
  )
  rRepositories!: string | null;
  /**
   * Where built packages (a cache keyed by package, version, source digest, R x.y and platform)
   * and environments' libraries are kept; null: the R engine's own runtime directory, made anew
   * at each start. Nodes that share it build each package once. The sandbox's user must be able
   * to reach it (docs/environments.md).
   */
  @IsOptional() @IsString() rEnvironmentsDir!: string | null;
  /** How many environments each application keeps (the one it asks for among them): what a rollback can go back to. */
  @IsInt() @Min(1) @Max(1000) environmentHistory!: number;
  // security (docs/security.md)
  /** none, or a comma-separated list of basic, apiKey, oidc (checked by securityConfigProblems). */
  @IsString() authMode!: AuthMode;
  @IsOptional() @IsString() adminUser!: string | null;
  @IsOptional() @IsString() adminPassword!: string | null;
  @IsObject() users!: Record<string, UserEntry>;
  @IsObject() apiKeys!: Record<string, ApiKeyEntry>;
  @IsObject() globalAdmins!: GlobalAdmins;
  @IsObject() applicationSecurity!: Record<string, ApplicationSecurity>;
  @IsInt() @Min(1) authMaxFailures!: number;
  @IsInt() @Min(1) authFailureWindowSeconds!: number;
  @IsOptional() @IsString() oidcIssuer!: string | null;
  @IsOptional() @IsString() oidcAudience!: string | null;
  @IsString() oidcPrincipalClaim!: string;
  @IsString() oidcRolesClaims!: string;
  @IsString() oidcAlgorithms!: string;
  @IsInt() @Min(0) @Max(600) oidcClockToleranceSeconds!: number;
  @IsInt() @Min(1) oidcJwksCooldownSeconds!: number;
  @IsOptional() @IsString() oidcClientId!: string | null;
  @IsOptional() @IsString() oidcClientSecret!: string | null;
  @IsString() oidcScope!: string;
  @IsInt() @Min(1) @Max(720) oidcSessionHours!: number;
  /**
   * Keys the sealed (AES-256-GCM) cookie that carries a sign-in under way; the same on every API
   * node. Unset: derived from OIDC_CLIENT_SECRET, else random per process (one node only).
   */
  @IsOptional() @IsString() @MinLength(32) signInSecret!: string | null;

  // upload: multipart form submissions (the upload page). Files are limited by maxRequestBytes.
  @IsInt() @Min(1) formMaxFiles!: number;
  @IsInt() @Min(1) formMaxFields!: number;
  @IsInt() @Min(1) formMaxFieldBytes!: number;
  /** Where uploaded form files wait until the job is stored; unset: the system's temp directory. */
  @IsOptional() @IsString() formTempDir!: string | null;

  // admin and system
  /** Largest catalog file the admin API accepts (bytes); larger: 413. */
  @IsInt() @Min(1) catalogMaxFileBytes!: number;
  /** Longest the deep health check waits for the database and R (ms) before answering ERROR. */
  @IsInt() @Min(100) healthCheckTimeoutMs!: number;
  /** Role worker only (it has no API server): serve `/metrics` on this port; 0: not at all. */
  @IsInt() @Min(0) @Max(65535) workerMetricsPort!: number;
  /** Who may read /metrics: token (a bearer METRICS_TOKEN; none set: nobody) or open (anyone). */
  @IsIn(METRICS_ACCESS_MODES) metricsAccess!: (typeof METRICS_ACCESS_MODES)[number];
  /** The bearer token /metrics asks for with METRICS_ACCESS=token; 16 characters at least. */
  @IsOptional() @IsString() @MinLength(16) metricsToken!: string | null;

  // function calls
  /** Warm native R sessions per node for function calls (webR: its one instance). */
  @IsInt() @Min(1) @Max(64) functionSessions!: number;
  /** A session is replaced after this many calls. */
  @IsInt() @Min(1) functionSessionMaxCalls!: number;
  /** Time limit of one function call (job or /process). */
  @IsInt() @Min(1) functionTimeoutSeconds!: number;
  /** /process calls running at once on a node; more wait in its queue. */
  @IsInt() @Min(1) @Max(1024) processMaxConcurrent!: number;
  /** /process calls waiting on a node; beyond that the answer is 503 with Retry-After. */
  @IsInt() @Min(0) processMaxQueued!: number;

  // SOAP (SPEC §7)
  /** Longest a SOAP Process call waits for its job's result before a soap:Server fault. */
  @IsInt() @Min(1) soapTimeoutSeconds!: number;
  /** Most payload elements in one SOAP request; more: soap:Client fault. */
  @IsInt() @Min(1) soapMaxPayloads!: number;
  /** Most parameter elements in one SOAP request; more: soap:Client fault. */
  @IsInt() @Min(1) soapMaxParameters!: number;

  // fork server (script jobs on native R)
  /** fork: a warm R parent forks a child per script job (Linux); spawn: a fresh Rscript per job. */
  @IsIn(R_SCRIPT_MODES) rScriptMode!: (typeof R_SCRIPT_MODES)[number];

  // webR
  /** shared: one instance serves every application; per-application: each its own, kept warm. */
  @IsIn(WEBR_INSTANCE_MODES) webrInstances!: (typeof WEBR_INSTANCE_MODES)[number];

  // jobs by e-mail (docs/operations.md#jobs-by-e-mail)
  /** The mailboxes polled for jobs: a JSON list (src/mail/mail-settings.ts). */
  @IsArray() emailAccounts!: unknown[];
  /** Where replies are sent through: smtp://[user@]host[:port] or smtps://…; password in SMTP_PASSWORD. */
  @IsOptional()
  @Matches(/^smtps?:\/\/[^\s:@/]*@?[^\s@/]+\/?$/, {
    message: 'must be a URL such as smtps://jobs@smtp.example.com:465 (no password: SMTP_PASSWORD)',
  })
  smtpUrl!: string | null;
  @IsOptional() @IsString() smtpPassword!: string | null;
  /** Told when a reply cannot be delivered. */
  @IsOptional() @IsString() adminEmail!: string | null;
  /** The From of results sent at other modules' request (a schedule's `email`); unset: none sent. */
  @IsOptional() @IsString() emailFrom!: string | null;
  /** Results larger than this are linked in the reply instead of attached (an account may differ). */
  @IsInt() @Min(0) emailAttachMaxBytes!: number;
  /** EMAIL_ACCOUNTS checked, with their passwords read: set by loadConfig. */
  mailAccounts: EmailAccount[] = [];

  /** True when no DATABASE_URL is set: the service runs on PGlite under dataDir. */
  get embeddedDatabase(): boolean {
    return !this.databaseUrl;
  }
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  ${p}`).join('\n')}`);
  }
}

export function envNameOf(key: string): string {
  return key.replace(/([A-Z])/g, '_$1').toUpperCase();
}

/** A value as configuration errors may show it: secrets (SECRET_CONFIG_KEYS) never appear. */
function shown(key: string, value: string): string {
  return SECRET_CONFIG_KEYS.has(key) ? '(value hidden)' : value;
}

/** Converts an environment string to the type of the default value it overrides. */
function coerce(key: string, raw: string, defaultValue: unknown, problems: string[]): unknown {
  const name = envNameOf(key);
  if (typeof defaultValue === 'number') {
    if (!/^-?\d+$/.test(raw.trim())) {
      problems.push(`${name}=${raw}: must be a whole number`);
      return defaultValue;
    }
    return Number(raw);
  }
  if (typeof defaultValue === 'boolean') {
    if (!/^(true|false|1|0|yes|no)$/i.test(raw.trim())) {
      problems.push(`${name}=${raw}: must be true or false`);
      return defaultValue;
    }
    return /^(true|1|yes)$/i.test(raw.trim());
  }
  if (defaultValue !== null && typeof defaultValue === 'object') {
    try {
      return JSON.parse(raw) as unknown;
    } catch {
      problems.push(`${name}=${shown(key, raw)}: must be a JSON object`);
      return defaultValue;
    }
  }
  return raw === '' ? null : raw;
}

function describe(error: ValidationError): string {
  const name = envNameOf(error.property);
  const reasons = Object.values(error.constraints ?? {}).map((m) =>
    m.replace(`${error.property} `, ''),
  );
  return `${name}=${shown(error.property, JSON.stringify(error.value))}: ${reasons.join('; ')}`;
}

/**
 * Builds and validates the configuration. Throws ConfigError with one line per bad setting,
 * each naming the environment variable to fix.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  const { defaults, merged } = readConfigFiles();
  const problems: string[] = [];
  for (const key of Object.keys(defaults)) {
    const raw = env[envNameOf(key)];
    if (raw !== undefined) {
      merged[key] = coerce(key, raw, defaults[key], problems);
    }
  }
  const config = plainToInstance(AppConfig, merged);
  for (const error of validateSync(config, { forbidUnknownValues: true })) {
    problems.push(describe(error));
  }
  const proxyProblem = trustProxyProblem(config);
  if (proxyProblem !== null) {
    problems.push(proxyProblem);
  }
  for (const [app, slots] of Object.entries(config.applicationSlots ?? {})) {
    if (!/^\w{1,64}$/.test(app) || !Number.isInteger(slots) || slots < 1) {
      problems.push(
        `APPLICATION_SLOTS: "${app}": ${String(slots)} must map an application name to a positive whole number`,
      );
    }
  }
  problems.push(...applicationSettingsProblems(config.applicationSettings));
  if (config.auditPseudonymize && (config.auditPseudonymKey ?? '').length < 32) {
    problems.push(
      'AUDIT_PSEUDONYM_KEY: AUDIT_PSEUDONYMIZE=true needs a key of at least 32 characters (e.g. openssl rand -base64 32)',
    );
  }
  problems.push(...securityConfigProblems(config));
  if (!config.databaseUrl && (config.databaseListenUrl || config.databasePooler !== 'none')) {
    problems.push(
      `${config.databaseListenUrl ? 'DATABASE_LISTEN_URL' : 'DATABASE_POOLER'}: needs DATABASE_URL (the embedded database has no pooler and listens in-process); unset it or set DATABASE_URL`,
    );
  }
  if (config.heartbeatSeconds >= config.leaseSeconds) {
    problems.push(
      `HEARTBEAT_SECONDS=${config.heartbeatSeconds}: must be less than LEASE_SECONDS (${config.leaseSeconds})`,
    );
  }
  if (config.shutdownTimeoutSeconds <= config.shutdownGraceSeconds) {
    problems.push(
      `SHUTDOWN_TIMEOUT_SECONDS=${config.shutdownTimeoutSeconds}: must be more than SHUTDOWN_GRACE_SECONDS (${config.shutdownGraceSeconds}), which running jobs may take to finish`,
    );
  }
  for (const url of rRepositoriesOf(config)) {
    if (url.startsWith('file://') && url.split('/').some((part) => part === '..' || part === '.')) {
      problems.push(`R_REPOSITORIES: ${url} must name its directory without . or .. parts`);
    }
  }
  const mail = emailAccountsOf(config, env);
  problems.push(...mail.problems);
  if (problems.length > 0) {
    throw new ConfigError(problems);
  }
  config.mailAccounts = mail.accounts;
  config.dataDir = resolve(config.dataDir);
  config.rEnvironmentsDir = config.rEnvironmentsDir ? resolve(config.rEnvironmentsDir) : null;
  config.catalogDir = resolve(PROJECT_ROOT_DIR, config.catalogDir);
  return config;
}

export { PROJECT_ROOT_DIR, SERVICE_VERSION };
