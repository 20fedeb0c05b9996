import { userInfo } from 'node:os';
import { maskUrlCredentials } from '../admin/masked-configuration';
import type { AuditActor } from '../audit/audit.service';
import { identifyRequestActor, runAsRequest } from '../common/request-actor';
import type { DatabaseConfig } from '../config/config-slices';
import { usePrivateUmask } from '../storage/private-files';
import { EXIT_CONFIGURATION, EXIT_FAILED } from './cli-command';

/** Which database a command works on, for its output; a password in the URL is masked. */
export function describeDatabase(config: DatabaseConfig): string {
  return config.embeddedDatabase
    ? `embedded database in ${config.dataDir}`
    : `database ${maskUrlCredentials(config.databaseUrl ?? '')}`;
}

/** Who the command line acts as, in the audit trail: `cli:<OS user>`. */
export function cliActor(): AuditActor {
  return { principal: `cli:${userInfo().username}`, authMethod: 'commandLine' };
}

/**
 * Runs `fn` as the command line's actor (cliActor), for services that take who acts from the
 * request: their audit rows name `cli:<OS user>`.
 */
export function asCliActor<T>(fn: () => Promise<T>): Promise<T> {
  return runAsRequest(null, null, () => {
    const actor = cliActor();
    identifyRequestActor(actor.principal ?? 'cli', actor.authMethod ?? 'commandLine');
    return fn();
  });
}

/**
 * Runs a command-line entry point and exits with its code. Failures print one line prefixed
 * with the command's name, never a stack trace; a configuration error prints its own lines and
 * exits with EXIT_CONFIGURATION.
 */
export function runCommand(name: string, main: (argv: string[]) => Promise<number>): void {
  // What a command creates (an embedded database, a dump) is its user's only, as the service's.
  usePrivateUmask();
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    async (error: unknown) => {
      // Loaded already when the configuration was read: only a failure imports it.
      const { ConfigError } = await import('../config/app-config');
      if (error instanceof ConfigError) {
        for (const problem of error.problems) {
          console.error(`${name}: configuration: ${problem}`);
        }
        process.exit(EXIT_CONFIGURATION);
      }
      console.error(`${name}: ${(error as Error).message}`);
      process.exit(EXIT_FAILED);
    },
  );
}
