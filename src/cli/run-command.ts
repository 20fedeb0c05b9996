import { maskUrlCredentials } from '../admin/masked-configuration';
import { ConfigError } from '../config/app-config';
import type { DatabaseConfig } from '../config/config-slices';

/** Which database a command works on, for its output; a password in the URL is masked. */
export function describeDatabase(config: DatabaseConfig): string {
  return config.embeddedDatabase
    ? `embedded database in ${config.dataDir}`
    : `database ${maskUrlCredentials(config.databaseUrl ?? '')}`;
}

/** The exit status of a configuration error, as the server's (EX_CONFIG). */
export const EXIT_CONFIGURATION = 78;

/**
 * Runs a command-line entry point and exits with its code. Failures print one line prefixed
 * with the command's name, never a stack trace; a configuration error prints its own lines and
 * exits with EXIT_CONFIGURATION.
 */
export function runCommand(name: string, main: (argv: string[]) => Promise<number>): void {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error: unknown) => {
      if (error instanceof ConfigError) {
        for (const problem of error.problems) {
          console.error(`${name}: configuration: ${problem}`);
        }
        process.exit(EXIT_CONFIGURATION);
      }
      console.error(`${name}: ${(error as Error).message}`);
      process.exit(1);
    },
  );
}
