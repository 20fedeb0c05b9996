import { configSlice } from './config-slice';

/*
 * The configuration by concern. AppConfig loads and validates every setting once, at start-up
 * (loadConfig); each class below is a typed view of some of its keys, provided by ConfigModule
 * and injected where the concern is handled. A key may belong to more than one slice: the views
 * read the same AppConfig, so they never disagree.
 */

/** The node: its role, HTTP port, the URL clients reach it by, logging. */
export abstract class NodeConfig extends configSlice([
  'role',
  'port',
  'host',
  'trustProxy',
  'publicBaseUrl',
  'corsOrigins',
  'logLevel',
  'logFormat',
  'accessLog',
]) {}

/** The database: the server or the embedded one under DATA_DIR, migrations, the example catalog. */
export abstract class DatabaseConfig extends configSlice([
  'databaseUrl',
  'databaseListenUrl',
  'databasePooler',
  'databasePoolSize',
  'embeddedDatabase',
  'dataDir',
  'migrationsRun',
  'catalogDir',
]) {}

/**
 * The per-application maps, which stored application settings change at run time (their
 * entries replaced in place, src/applications): read them on each use, never copy them.
 * RESULT_RETENTION_HOURS and MAX_REQUEST_BYTES are the defaults an application's settings
 * fall back on (its results' lifetime, its largest job).
 */
export abstract class ApplicationsConfig extends configSlice([
  'applicationSecurity',
  'applicationSettings',
  'applicationSlots',
  'resultRetentionHours',
  'maxRequestBytes',
]) {}

/** Applications' R environments: the repositories packages come from, the history kept. */
export abstract class EnvironmentsConfig extends configSlice([
  'rRepositories',
  'environmentHistory',
  'rEnvironmentsDir',
]) {}

/** Queue delivery: how often nodes poll, leases and heartbeats, attempts and their back-off. */
export abstract class QueueConfig extends configSlice([
  'pollIntervalMs',
  'leaseSeconds',
  'heartbeatSeconds',
  'maxAttempts',
  'retryBackoffMs',
]) {}

/** A worker: its slots, the jobs' time limits and logs, shutdown, the supervisor's clean-up. */
export abstract class WorkerConfig extends configSlice([
  'scriptSlots',
  'functionSlots',
  'applicationSlots',
  'jobTimeoutSeconds',
  'functionTimeoutSeconds',
  'jobLogMaxBytes',
  'shutdownGraceSeconds',
  'shutdownTimeoutSeconds',
  'resultRetentionHours',
  'usageRetentionDays',
  'auditRetentionDays',
]) {}

/**
 * R: the engine, where R is, the sandbox and a job's limits, fork servers and their slots, warm
 * sessions for function calls, webR. AUTH_MODE: without a sandbox, R may not run where there
 * are users to protect; MAX_REQUEST_BYTES and ZIP_MAX_ENTRIES bound what R hands back.
 */
export abstract class REngineConfig extends configSlice([
  'role',
  'rEnvironmentsDir',
  'rEngine',
  'rHome',
  'rscriptPath',
  'rMemoryLimitMb',
  'rSandbox',
  'rCpuLimitSeconds',
  'rMaxProcesses',
  'rMaxFileMb',
  'rMaxWriteMb',
  'rScriptMode',
  'webrInstances',
  'scriptSlots',
  'applicationSlots',
  'applicationSettings',
  'resultRetentionHours',
  'jobTimeoutSeconds',
  'functionSessions',
  'functionSessionMaxCalls',
  'maxRequestBytes',
  'zipMaxEntries',
  'authMode',
]) {}

/** What an intake takes in: the request's bytes, ZIP archives, the upload form's parts. */
export abstract class IntakeLimitsConfig extends configSlice([
  'maxRequestBytes',
  'zipMaxEntries',
  'zipMaxUncompressedBytes',
  'zipMaxCompressionRatio',
  'formMaxFiles',
  'formMaxFields',
  'formMaxFieldBytes',
  'formTempDir',
]) {}

/** Drop directories: how often they are scanned, and the leases of their claims. */
export abstract class DropDirectoryConfig extends configSlice([
  'dropPollIntervalMs',
  'leaseSeconds',
  'heartbeatSeconds',
]) {}

/** SOAP (SPEC §7): how long Process waits, how many payloads and parameters a request has. */
export abstract class SoapConfig extends configSlice([
  'soapTimeoutSeconds',
  'soapMaxPayloads',
  'soapMaxParameters',
]) {}

/** Job callbacks: one attempt's time limit, the retries and how long they go on. */
export abstract class CallbackConfig extends configSlice([
  'callbackRetrySeconds',
  'callbackFirstRetryMs',
  'callbackMaxRetryDelaySeconds',
  'callbackTimeoutSeconds',
]) {}

/** Authentication and access rules (users, API keys, OIDC, the per-application rules). */
export abstract class SecurityConfig extends configSlice([
  'authMode',
  'adminUser',
  'adminPassword',
  'users',
  'apiKeys',
  'globalAdmins',
  'applicationSecurity',
  'authMaxFailures',
  'authFailureWindowSeconds',
  'oidcIssuer',
  'oidcAudience',
  'oidcPrincipalClaim',
  'oidcRolesClaims',
  'oidcAlgorithms',
  'oidcClockToleranceSeconds',
  'oidcJwksCooldownSeconds',
  'oidcClientId',
  'oidcClientSecret',
  'oidcScope',
  'oidcSessionHours',
  'signInSecret',
]) {}

/** E-mail: the mailboxes polled for jobs (checked, passwords read) and the SMTP of replies. */
export abstract class MailConfig extends configSlice([
  'mailAccounts',
  'smtpUrl',
  'smtpPassword',
  'adminEmail',
  'emailFrom',
  'emailAttachMaxBytes',
]) {}

/**
 * The REST API: the base URL its links and documents name, a request body's bytes, the longest
 * `?wait=N` a client may ask for on results and job status (the OpenAPI document states it),
 * the event streams a caller may hold open on a node.
 */
export abstract class RestApiConfig extends configSlice([
  'publicBaseUrl',
  'maxRequestBytes',
  'resultWaitMaxSeconds',
  'eventStreamsPerCaller',
]) {}

/**
 * Synchronous function calls (/process): how many run at once on a node and wait behind them,
 * one call's time limit, a request's bytes.
 */
export abstract class ProcessConfig extends configSlice([
  'processMaxConcurrent',
  'processMaxQueued',
  'functionTimeoutSeconds',
  'maxRequestBytes',
]) {}

/** The audit trail: principals pseudonymized (and the key of their hash), how long rows stay. */
export abstract class AuditConfig extends configSlice([
  'auditPseudonymize',
  'auditPseudonymKey',
  'auditRetentionDays',
]) {}

/**
 * Administration and monitoring: the largest catalog file the admin API takes, how long the
 * deep health check waits, the port a worker serves /metrics on.
 */
export abstract class AdminConfig extends configSlice([
  'catalogMaxFileBytes',
  'healthCheckTimeoutMs',
  'workerMetricsPort',
  'metricsAccess',
  'metricsToken',
]) {}

/** Every slice, as ConfigModule provides them. */
export const CONFIG_SLICES = [
  NodeConfig,
  DatabaseConfig,
  ApplicationsConfig,
  QueueConfig,
  WorkerConfig,
  REngineConfig,
  IntakeLimitsConfig,
  DropDirectoryConfig,
  SoapConfig,
  CallbackConfig,
  SecurityConfig,
  MailConfig,
  RestApiConfig,
  ProcessConfig,
  AuditConfig,
  AdminConfig,
  EnvironmentsConfig,
] as const;
