import type { EntityManager } from 'typeorm';
import type { ApiKeysService } from '../api-keys/api-keys.service';
import type { ApplicationSettingsService } from '../applications/application-settings.service';
import type { AuditService } from '../audit/audit.service';
import type { SecurityConfig } from '../config/config-slices';
import type { SchedulesService } from '../schedules/schedules.service';
import type { AdminAccountsService } from '../security/admin-accounts.service';

/**
 * What a ServiceCommand acts with: the same services the admin API uses. A running service gives
 * its own (CommandChannel); the command line alone builds each on the database it opened, when
 * the command first asks for it, so that a command loads only what it uses (cli/cli-state.ts).
 */
export interface CommandServices {
  /** The security settings in force where the command runs (the names of configured users). */
  readonly config: SecurityConfig;
  audit(): Promise<AuditService>;
  apiKeys(): Promise<ApiKeysService>;
  applicationSettings(): Promise<ApplicationSettingsService>;
  adminAccounts(): Promise<AdminAccountsService>;
  schedules(): Promise<SchedulesService>;
  /** Runs `work` in one transaction of the service's database. */
  transaction<T>(work: (manager: EntityManager) => Promise<T>): Promise<T>;
}
