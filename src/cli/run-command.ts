import { maskUrlCredentials } from '../admin/masked-configuration';
import { AppConfig, ConfigError } from '../config/app-config';

/** Which database a command works on, for its output; a password in the URL is masked. */
export function describeDatabase(config: AppConfig): string {
  return config.embeddedDatabase
    ? `embedded database in ${config.dataDir}`
    : `database ${maskUrlCredentials(config.databaseUrl ?? '')}`;
}

/**
 * Runs a command-line entry point and exits with its code. Failures print one line prefixed
 * with the command's name (a configuration error prints its own lines), never a stack trace.
 */
export function runCommand(name: string, main: (argv: string[]) => Promise<number>): void {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(
        error instanceof ConfigError ? error.message : `${name}: ${(error as Error).message}`,
      );
      process.exit(1);
    },
  );
}
