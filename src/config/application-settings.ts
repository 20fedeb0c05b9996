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
}

/** The settings of one application with every default applied. */
export interface ResolvedApplicationSettings {
  networkAllowed: boolean;
  resultRetentionHours: number;
  callbackHosts: string[];
  callbackSecret: string | null;
  dropDirectory: string | null;
}

export interface ApplicationSettingsSource {
  applicationSettings: Record<string, ApplicationSettings>;
  resultRetentionHours: number;
}

const APPLICATION = /^\w{1,64}$/;
const FIELDS = new Set([
  'networkAllowed',
  'resultRetentionHours',
  'callbackHosts',
  'callbackSecret',
  'dropDirectory',
]);

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
  };
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
      if (!FIELDS.has(key)) {
        problems.push(`${where}: unknown setting "${key}" (known: ${[...FIELDS].join(', ')})`);
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
