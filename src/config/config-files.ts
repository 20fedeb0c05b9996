import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { PROJECT_ROOT_DIR } from './project-root';

function readJson(path: string): Record<string, unknown> {
  return existsSync(path)
    ? (JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>)
    : {};
}

/** `config/default.json`, and it with `config/local.json` over it: before the environment. */
export function readConfigFiles(): {
  defaults: Record<string, unknown>;
  merged: Record<string, unknown>;
} {
  const defaults = readJson(join(PROJECT_ROOT_DIR, 'config', 'default.json'));
  return {
    defaults,
    merged: { ...defaults, ...readJson(join(PROJECT_ROOT_DIR, 'config', 'local.json')) },
  };
}

/**
 * Where the database is, read as loadConfig reads DATABASE_URL and DATA_DIR but without checking
 * the rest: what the command line needs to find a running service to ask (command-channel.ts)
 * before it loads the configuration's validation. `dataDir` null: DATABASE_URL names a server.
 */
export function embeddedDataDir(env: NodeJS.ProcessEnv = process.env): string | null {
  const { merged } = readConfigFiles();
  const setting = (name: string, key: string): unknown =>
    env[name] !== undefined ? env[name] || null : merged[key];
  if (setting('DATABASE_URL', 'databaseUrl')) {
    return null;
  }
  const dataDir = setting('DATA_DIR', 'dataDir');
  return typeof dataDir === 'string' ? resolve(dataDir) : null;
}
