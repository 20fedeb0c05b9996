import { Logger } from '@nestjs/common';
import { AppConfig, loadConfig } from '../config/app-config';
import { DATABASE_SCHEMA } from '../database-schema';
import { CliDatabase, openDatabaseForCli, pendingMigrations } from '../storage/database-options';
import type { CommandOutput, ServiceCommand } from '../command-line/cli-command';
import type { CommandServices } from '../command-line/command-services';
import { performCommand } from '../command-line/perform-command';

/**
 * What a command needs once its arguments are right: the configuration and the database. The
 * commands import this module only then (command-line/cli-command.ts), as it loads TypeORM, NestJS and the
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

/**
 * Performs a ServiceCommand in this process, on the database it opens (no running service to ask,
 * or DATABASE_URL names a server): each service built on that database when the command first asks
 * for it, as the admin API's are, so that a command loads only what it uses.
 */
export async function performHere<Request>(
  command: ServiceCommand<Request>,
  request: Request,
  output: CommandOutput,
): Promise<number> {
  await command.check?.(request);
  const config = loadConfig();
  const { dataSource, target, close } = await openStateForCli(config);
  try {
    const once = <T>(make: () => Promise<T>): (() => Promise<T>) => {
      let made: Promise<T> | null = null;
      return () => (made ??= make());
    };
    const audit = once(async () => {
      const { AuditService } = await import('../audit/audit.service');
      const { AuditRepository } = await import('../audit/audit.repository');
      return new AuditService(new AuditRepository(dataSource), config);
    });
    const services: CommandServices = {
      config,
      audit,
      transaction: (work) => dataSource.transaction(work),
      // No DatabaseEvents: a revocation notifies with no node id, so every node hears it.
      apiKeys: once(async () => {
        const { ApiKeysService } = await import('../api-keys/api-keys.service');
        const { ApiKeyRepository } = await import('../api-keys/api-key.repository');
        return new ApiKeysService(new ApiKeyRepository(dataSource), undefined, await audit());
      }),
      applicationSettings: once(async () => {
        const { ApplicationSettingsService } =
          await import('../applications/application-settings.service');
        const { ApplicationSettingsRepository } =
          await import('../applications/application-settings.repository');
        return new ApplicationSettingsService(
          config,
          new ApplicationSettingsRepository(dataSource),
          undefined,
          await audit(),
        );
      }),
      adminAccounts: once(async () => {
        const { AdminAccountsService } = await import('../security/admin-accounts.service');
        const { AdminAccountRepository } = await import('../security/admin-account.repository');
        return new AdminAccountsService(new AdminAccountRepository(dataSource));
      }),
      schedules: once(async () => {
        const { CatalogService } = await import('../catalog/catalog.service');
        const { KnownApplications } = await import('../catalog/known-applications');
        const { CallbackUrlPolicy } = await import('../callbacks/callback-url.policy');
        const { HostLookup } = await import('../callbacks/host-lookup');
        const { ScheduleRepository } = await import('../schedules/schedule.repository');
        const { SchedulesService } = await import('../schedules/schedules.service');
        const { DatabaseEvents } = await import('../storage/database-events.service');
        const { NodeIdentity } = await import('../storage/node-identity');
        // The command's own node id before what it notifies: every service node hears the change.
        const events = new DatabaseEvents(target, new NodeIdentity(), dataSource);
        const catalog = new CatalogService(dataSource);
        return new SchedulesService(
          new ScheduleRepository(dataSource, events),
          catalog,
          new KnownApplications(config, catalog),
          new CallbackUrlPolicy(config, new HostLookup()),
          config,
          await audit(),
        );
      }),
    };
    return await performCommand(command, request, services, output);
  } finally {
    await close();
  }
}
