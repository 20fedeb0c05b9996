import { Logger } from '@nestjs/common';
import { AppConfig, loadConfig } from '../config/app-config';
import { DATABASE_SCHEMA } from '../database-schema';
import { CliDatabase, openDatabaseForCli, pendingMigrations } from '../storage/database-options';

/**
 * What a command needs once its arguments are right: the configuration and the database. The
 * commands import this module only then (cli-command.ts), as it loads TypeORM, NestJS and the
 * configuration's validation.
 */
export { loadConfig };

/** The services' log lines repeat what the command prints; their warnings and errors stay. */
export function quietServiceLogs(): void {
  Logger.overrideLogger(['warn', 'error', 'fatal']);
}

/**
 * Opens the database for a command that reads or writes state: the embedded database it opened
 * itself is brought up to date; a running service's (viaService) or a server's must be, or the
 * command fails with one line.
 */
export async function openStateForCli(config: AppConfig): Promise<CliDatabase> {
  quietServiceLogs();
  const database = await openDatabaseForCli(config, DATABASE_SCHEMA);
  try {
    if (config.embeddedDatabase && !database.viaService) {
      await database.dataSource.runMigrations({ transaction: 'each' });
    } else if ((await pendingMigrations(database.dataSource)).length > 0) {
      throw new Error('the database has pending migrations; run `svc migrate run` first');
    }
    return database;
  } catch (error) {
    await database.close();
    throw error;
  }
}
