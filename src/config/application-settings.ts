import { isAbsolute, resolve } from 'node:path';

/**
 * Per-application settings that are not access rules (those are APPLICATION_SECURITY):
 * `APPLICATION_SETTINGS={"reports":{"networkAllowed":true,"resultRetentionHours":24}}`.
 * Every field is optional; an application without an entry gets the defaults below. Read them
 * through `applicationSettingsOf`, never from the raw map, so defaults exist once.
 */
export interface ApplicationSettings {
  /** R code of this application may open network connections (off: no network in the sandbox). */
  networkAllowed?: boolean;
  /** Results of this application are deleted after this many hours (0: kept); default RESULT_RETENTION_HOURS. */
  resultRetentionHours?: number;
  /** Host names (or IP addresses) that job callbacks of this application may be sent to. */
  callbackHosts?: string[];
  /** Key of the HMAC-SHA256 signature sent with this application's callbacks. */
  callbackSecret?: string;
  /** A drop directory (absolute path): job files renamed into its inbox/ are submitted. */
  dropDirectory?: string;
  /** Its share of free slots when several applications have jobs queued (default 1). */
  weight?: number;
  /** Most of its jobs running at once across the whole cluster (default: no cap). */
  maxRunningJobs?: number;
  /** Most of its jobs queued at once; a submission beyond answers 429 (default: no limit). */
  maxQueuedJobs?: number;
  /** Submissions per minute for the whole application, a token bucket of that size (default: none). */
  maxSubmissionsPerMinute?: number;
  /** Submissions per minute for each caller (principal) of the application (default: none). */
  maxSubmissionsPerMinutePerPrincipal?: number;
  /** Largest job (request body, or the sum of its files) in bytes; MAX_REQUEST_BYTES applies too. */
  maxJobSizeBytes?: number;
  /** The priority of a job that asks for none (default 0; higher runs first within the application). */
  defaultPriority?: number;
  /** The lowest priority a job may ask for (default 0). */
  minPriority?: number;
  /** The highest priority a job may ask for (default 0). */
  maxPriority?: number;
}

/** The settings of one application with every default applied. */
export interface ResolvedApplicationSettings {
  networkAllowed: boolean;
  resultRetentionHours: number;
  callbackHosts: string[];
  callbackSecret: string | null;
  dropDirectory: string | null;
  weight: number;
  maxRunningJobs: number | null;
  maxQueuedJobs: number | null;
  maxSubmissionsPerMinute: number | null;
  maxSubmissionsPerMinutePerPrincipal: number | null;
  maxJobSizeBytes: number | null;
  defaultPriority: number;
  minPriority: number;
  maxPriority: number;
}

export interface ApplicationSettingsSource {
  applicationSettings: Record<string, ApplicationSettings>;
  resultRetentionHours: number;
}

const APPLICATION = /^\w{1,64}$/;
/** Every setting an entry may have (the OpenAPI's ApplicationSettingsEntry names the same). */
export const APPLICATION_SETTING_FIELDS: ReadonlySet<string> = new Set([
  'networkAllowed',
  'resultRetentionHours',
  'callbackHosts',
  'callbackSecret',
  'dropDirectory',
  'weight',
  'maxRunningJobs',
  'maxQueuedJobs',
  'maxSubmissionsPerMinute',
  'maxSubmissionsPerMinutePerPrincipal',
  'maxJobSizeBytes',
  'defaultPriority',
  'minPriority',
  'maxPriority',
]);

/** The limits that are whole numbers >= 1 when set. */
const POSITIVE_LIMITS = [
  'maxRunningJobs',
  'maxQueuedJobs',
  'maxSubmissionsPerMinute',
  'maxSubmissionsPerMinutePerPrincipal',
  'maxJobSizeBytes',
] as const;

/** Priorities are small whole numbers (the job table's column is an int). */
const PRIORITY_RANGE = 1000;

export function applicationSettingsOf(
  config: ApplicationSettingsSource,
  applicationName: string,
): ResolvedApplicationSettings {
  const entry = Object.prototype.hasOwnProperty.call(config.applicationSettings, applicationName)
    ? config.applicationSettings[applicationName]
    : {};
  return {
    networkAllowed: entry.networkAllowed === true,
    resultRetentionHours: entry.resultRetentionHours ?? config.resultRetentionHours,
    callbackHosts: entry.callbackHosts ?? [],
    callbackSecret: entry.callbackSecret ?? null,
    dropDirectory: entry.dropDirectory ?? null,
    weight: entry.weight ?? 1,
    maxRunningJobs: entry.maxRunningJobs ?? null,
    maxQueuedJobs: entry.maxQueuedJobs ?? null,
    maxSubmissionsPerMinute: entry.maxSubmissionsPerMinute ?? null,
    maxSubmissionsPerMinutePerPrincipal: entry.maxSubmissionsPerMinutePerPrincipal ?? null,
    maxJobSizeBytes: entry.maxJobSizeBytes ?? null,
    defaultPriority: entry.defaultPriority ?? 0,
    minPriority: entry.minPriority ?? Math.min(0, entry.defaultPriority ?? 0),
    maxPriority: entry.maxPriority ?? Math.max(0, entry.defaultPriority ?? 0),
  };
}

/**
 * What the claim needs of the applications whose weight or running cap differs from the
 * defaults (every other application: weight 1, no cap), read through applicationSettingsOf.
 */
export interface ClaimPolicies {
  applications: string[];
  weights: number[];
  maxRunning: Array<number | null>;
}

export function claimPoliciesOf(config: ApplicationSettingsSource): ClaimPolicies {
  const policies: ClaimPolicies = { applications: [], weights: [], maxRunning: [] };
  for (const app of Object.keys(config.applicationSettings)) {
    const settings = applicationSettingsOf(config, app);
    if (settings.weight !== 1 || settings.maxRunningJobs !== null) {
      policies.applications.push(app);
      policies.weights.push(settings.weight);
      policies.maxRunning.push(settings.maxRunningJobs);
    }
  }
  return policies;
}

/** The applications whose result retention differs from RESULT_RETENTION_HOURS, with their hours. */
export function retentionByApplication(config: ApplicationSettingsSource): Record<string, number> {
  const hours: Record<string, number> = {};
  for (const [app, entry] of Object.entries(config.applicationSettings)) {
    if (entry.resultRetentionHours !== undefined) {
      hours[app] = entry.resultRetentionHours;
    }
  }
  return hours;
}

/** One line per problem, each naming APPLICATION_SETTINGS and the application. */
export function applicationSettingsProblems(settings: unknown): string[] {
  const problems: string[] = [];
  const dropDirectories = new Map<string, string>();
  if (settings === null || typeof settings !== 'object' || Array.isArray(settings)) {
    return ['APPLICATION_SETTINGS: must be a JSON object of application names'];
  }
  for (const [app, entry] of Object.entries(settings as Record<string, unknown>)) {
    const where = `APPLICATION_SETTINGS: "${app}"`;
    if (!APPLICATION.test(app)) {
      problems.push(`${where}: not an application name (letters, digits, _; at most 64)`);
      continue;
    }
    if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) {
      problems.push(`${where}: must be an object of settings`);
      continue;
    }
    const e = entry as Record<string, unknown>;
    for (const key of Object.keys(e)) {
      if (!APPLICATION_SETTING_FIELDS.has(key)) {
        problems.push(
          `${where}: unknown setting "${key}" (known: ${[...APPLICATION_SETTING_FIELDS].join(', ')})`,
        );
      }
    }
    if (e.networkAllowed !== undefined && typeof e.networkAllowed !== 'boolean') {
      problems.push(`${where}: networkAllowed must be true or false`);
    }
    if (
      e.resultRetentionHours !== undefined &&
      !(Number.isInteger(e.resultRetentionHours) && (e.resultRetentionHours as number) >= 0)
    ) {
      problems.push(`${where}: resultRetentionHours must be a whole number >= 0`);
    }
    if (
      e.callbackHosts !== undefined &&
      !(
        Array.isArray(e.callbackHosts) &&
        e.callbackHosts.every(
          (h) => typeof h === 'string' && /^[^\s/:@]+$|^\[[0-9a-f:.]+\]$/i.test(h),
        )
      )
    ) {
      problems.push(`${where}: callbackHosts must be a list of host names`);
    }
    if (
      e.callbackSecret !== undefined &&
      !(typeof e.callbackSecret === 'string' && e.callbackSecret.length >= 16)
    ) {
      problems.push(`${where}: callbackSecret must be a string of at least 16 characters`);
    }
    problems.push(...dropDirectoryProblems(where, e.dropDirectory, dropDirectories, app));
    problems.push(...queueSettingProblems(where, e));
  }
  return problems;
}

/** A drop directory must be an absolute path of one application only (each file one job). */
function dropDirectoryProblems(
  where: string,
  directory: unknown,
  seen: Map<string, string>,
  app: string,
): string[] {
  if (directory === undefined) {
    return [];
  }
  if (!(typeof directory === 'string' && isAbsolute(directory))) {
    return [`${where}: dropDirectory must be an absolute path, e.g. "/srv/svc/drop/${app}"`];
  }
  const key = resolve(directory);
  const other = seen.get(key);
  seen.set(key, app);
  return other === undefined
    ? []
    : [`${where}: dropDirectory ${directory} is already the drop directory of "${other}"`];
}

/** weight, the limits and the priorities of one application's entry. */
function queueSettingProblems(where: string, e: Record<string, unknown>): string[] {
  const problems: string[] = [];
  if (
    e.weight !== undefined &&
    !(typeof e.weight === 'number' && Number.isFinite(e.weight) && e.weight > 0 && e.weight <= 1000)
  ) {
    problems.push(`${where}: weight must be a number above 0 and at most 1000`);
  }
  for (const key of POSITIVE_LIMITS) {
    const value = e[key];
    if (value !== undefined && !(Number.isSafeInteger(value) && (value as number) >= 1)) {
      problems.push(`${where}: ${key} must be a whole number >= 1`);
    }
  }
  const priorities = ['defaultPriority', 'minPriority', 'maxPriority'] as const;
  for (const key of priorities) {
    const value = e[key];
    if (
      value !== undefined &&
      !(Number.isInteger(value) && Math.abs(value as number) <= PRIORITY_RANGE)
    ) {
      problems.push(`${where}: ${key} must be a whole number from -1000 to 1000`);
    }
  }
  if (priorities.some((key) => e[key] !== undefined && !Number.isInteger(e[key]))) {
    return problems;
  }
  const defaultPriority = (e.defaultPriority as number | undefined) ?? 0;
  const min = (e.minPriority as number | undefined) ?? Math.min(0, defaultPriority);
  const max = (e.maxPriority as number | undefined) ?? Math.max(0, defaultPriority);
  if (!(min <= defaultPriority && defaultPriority <= max)) {
    problems.push(
      `${where}: defaultPriority (${defaultPriority}) must lie within minPriority (${min}) and maxPriority (${max})`,
    );
  }
  return problems;
}
