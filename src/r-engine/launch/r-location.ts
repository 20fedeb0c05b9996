import { delimiter, isAbsolute, join } from 'node:path';
import type { REngineConfig } from '../../config/config-slices';
import { isExecutable } from './r-sandbox';

/** What the native engine reads of the configuration. */
export type NativeRConfig = Pick<REngineConfig, 'rHome' | 'rscriptPath' | 'rMemoryLimitMb'> &
  Partial<
    Pick<
      REngineConfig,
      | 'rScriptMode'
      | 'jobTimeoutSeconds'
      | 'rSandbox'
      | 'authMode'
      | 'rCpuLimitSeconds'
      | 'rMaxProcesses'
      | 'rMaxFileMb'
      | 'rMaxWriteMb'
      | 'scriptSlots'
      | 'applicationSlots'
      | 'rEnvironmentsDir'
    >
  > & {
    /**
     * Whether this node runs script jobs (false on ROLE=api: its engine serves function calls
     * only, and starts no fork servers).
     */
    scriptJobs?: boolean;
  };

export type ScriptMode = 'fork' | 'spawn';

const DEFAULT_PATH = '/usr/local/bin:/usr/bin:/bin';

/** The Rscript that config names (RSCRIPT_PATH, then R_HOME), else the first on PATH. */
export function chosenRscript(config: NativeRConfig): string {
  if (config.rscriptPath) {
    return config.rscriptPath;
  }
  if (config.rHome) {
    return join(config.rHome, 'bin', 'Rscript');
  }
  for (const dir of (process.env.PATH ?? DEFAULT_PATH).split(delimiter)) {
    if (dir && isExecutable(join(dir, 'Rscript'))) {
      return join(dir, 'Rscript');
    }
  }
  return 'Rscript';
}

/** The absolute path of a usable Rscript, or null when none is configured or on PATH. */
export function findRscript(config: NativeRConfig): string | null {
  const path = chosenRscript(config);
  return isAbsolute(path) && isExecutable(path) ? path : null;
}

/** The script mode to use: fork where the configuration asks for it and the OS can fork R. */
export function effectiveScriptMode(config: NativeRConfig): ScriptMode {
  return (config.rScriptMode ?? 'fork') === 'fork' && process.platform === 'linux'
    ? 'fork'
    : 'spawn';
}
