import { Injectable, Optional } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { DatabaseEvents, notificationPrefix } from '../storage/database-events.service';

/** Channel of the notification sent with every admin account made or changed. */
export const ADMIN_ACCOUNT_CHANGED_CHANNEL = 'svc_admin_account_changed';

/**
 * Every statement on `admin_account`. A change notifies ADMIN_ACCOUNT_CHANGED_CHANNEL in the same
 * statement (delivered at commit), so every node looks again, whichever node or command made it;
 * a command line has no DatabaseEvents and sends with no node id, so every node hears.
 */
@Injectable()
export class AdminAccountRepository {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    @Optional() private readonly events?: DatabaseEvents,
  ) {}

  async any(): Promise<boolean> {
    const [row] = await this.dataSource.query<Array<{ any: boolean }>>(
      'SELECT EXISTS (SELECT 1 FROM admin_account) AS any',
    );
    return row?.any === true;
  }

  async passwordHash(name: string): Promise<string | null> {
    const [row] = await this.dataSource.query<Array<{ hash: string }>>(
      'SELECT password_hash AS hash FROM admin_account WHERE name = $1',
      [name],
    );
    return row?.hash ?? null;
  }

  /**
   * Makes the account, or gives an existing one a new password; true when it was new. `manager`
   * is the caller's transaction (the audit row goes with it).
   */
  async save(
    name: string,
    passwordHash: string,
    at: Date,
    manager: EntityManager = this.dataSource.manager,
  ): Promise<boolean> {
    const [row] = await manager.query<Array<{ created: boolean }>>(
      `WITH saved AS (
         INSERT INTO admin_account (name, password_hash, created_at) VALUES ($1, $2, $3)
         ON CONFLICT (name) DO UPDATE SET password_hash = EXCLUDED.password_hash
         RETURNING (xmax = 0) AS created)
       SELECT created FROM saved
       CROSS JOIN (SELECT pg_notify('${ADMIN_ACCOUNT_CHANGED_CHANNEL}', $4::text) FROM saved) AS notified`,
      [name, passwordHash, at, this.events?.prefix ?? notificationPrefix('')],
    );
    return row?.created === true;
  }
}
