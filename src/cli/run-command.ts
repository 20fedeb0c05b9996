import { maskUrlCredentials } from '../admin/masked-configuration';
import type { DatabaseConfig } from '../config/config-slices';
import { usePrivateUmask } from '../storage/private-files';
import { EXIT_CONFIGURATION, EXIT_FAILED } from '../command-line/cli-command';

/** Which database a command works on, for its output; a password in the URL is masked. */
export function describeDatabase(config: DatabaseConfig): string {
  return config.embeddedDatabase
    ? `embedded database in ${config.dataDir}`
    : `database ${maskUrlCredentials(config.databaseUrl ?? '')}`;
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
