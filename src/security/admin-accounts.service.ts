import { Injectable, Logger, OnModuleInit, Optional } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { fastSecretHash, fastSecretMatches, randomSecret } from '../common/secret-hash';
import { DatabaseEvents } from '../storage/database-events.service';
import { ADMIN_ACCOUNT_CHANGED_CHANNEL, AdminAccountRepository } from './admin-account.repository';

/**
 * Global admins made at run time (`svc admin create`, docs/security.md#an-admin-made-at-run-time):
 * made through the database, so a running service takes them at once, and checked as ADMIN_USER
 * is, with HTTP Basic in every AUTH_MODE. Whether any exists is kept here (read at start, and
 * again on each notification of a change), so that the access policy, which answers at once, can
 * ask a caller for credentials instead of saying that no admin is configured.
 */
@Injectable()
export class AdminAccountsService implements OnModuleInit {
  private readonly logger = new Logger('Security');
  private exists = false;

  constructor(
    private readonly repository: AdminAccountRepository,
    @Optional() private readonly events?: DatabaseEvents,
  ) {}

  async onModuleInit(): Promise<void> {
    this.events?.subscribe(ADMIN_ACCOUNT_CHANGED_CHANNEL, () => void this.refresh());
    this.events?.onListening(() => void this.refresh());
    await this.refresh();
  }

  /** Whether an admin account existed when last looked at. */
  get any(): boolean {
    return this.exists;
  }

  /** Whether `name` is an account and `secret` its password; null when there is no such account. */
  async check(name: string, secret: string): Promise<boolean | null> {
    const hash = await this.repository.passwordHash(name);
    if (hash === null) {
      return null;
    }
    this.exists = true;
    return fastSecretMatches(secret, hash);
  }

  /**
   * Makes the account `name` (or gives it a new password), in `manager`'s transaction when given;
   * returns the password, to be shown once.
   */
  async create(
    name: string,
    manager?: EntityManager,
  ): Promise<{ password: string; created: boolean }> {
    const password = randomSecret();
    const created = await this.repository.save(name, fastSecretHash(password), new Date(), manager);
    this.exists = true;
    return { password, created };
  }

  private async refresh(): Promise<void> {
    try {
      this.exists = await this.repository.any();
    } catch (error) {
      this.logger.warn(`could not read the admin accounts: ${(error as Error).message}`);
    }
  }
}
