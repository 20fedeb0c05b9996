import { Injectable, Optional } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { DatabaseEvents, notificationPrefix } from '../storage/database-events.service';
import { ApiKeyEntity } from './api-key.entity';

/** Channel of the notification sent with every key revoked; the payload is the key's id. */
export const API_KEY_CHANGED_CHANNEL = 'svc_api_key_changed';

/** A key as listed: never its hash. */
export type ApiKeyListing = Omit<ApiKeyEntity, 'secretHash'>;

const LISTED_COLUMNS =
  'id, principal, roles, created_at AS "createdAt", created_by AS "createdBy", expires_at AS "expiresAt", last_used_at AS "lastUsedAt"';

/**
 * Every statement on `api_key`. A revocation notifies API_KEY_CHANGED_CHANNEL in the same
 * statement (delivered at commit), so every node drops the key from its cache whichever node or
 * command revoked it. In the service the sender is this node (it ignores its echo and is told
 * in-process); a command line has no DatabaseEvents and sends with no node id, so every node hears.
 */
@Injectable()
export class ApiKeyRepository {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    @Optional() private readonly events?: DatabaseEvents,
  ) {}

  private get sender(): string {
    return this.events?.prefix ?? notificationPrefix('');
  }

  /** Runs `work` in one transaction: a key's change and its audit row commit together. */
  inTransaction<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return this.dataSource.transaction(work);
  }

  /** Stores a new key; `manager` is the caller's transaction (the audit row goes with it). */
  async insert(key: ApiKeyEntity, manager: EntityManager = this.dataSource.manager): Promise<void> {
    await manager.query(
      `INSERT INTO api_key (id, principal, roles, secret_hash, created_at, created_by, expires_at)
       VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7)`,
      [
        key.id,
        key.principal,
        JSON.stringify(key.roles),
        key.secretHash,
        key.createdAt,
        key.createdBy,
        key.expiresAt,
      ],
    );
  }

  async list(): Promise<ApiKeyListing[]> {
    return this.dataSource.query<ApiKeyListing[]>(
      `SELECT ${LISTED_COLUMNS} FROM api_key ORDER BY created_at, id`,
    );
  }

  async find(id: string): Promise<ApiKeyEntity | null> {
    return this.dataSource.getRepository(ApiKeyEntity).findOne({ where: { id } });
  }

  /** Deletes a key and notifies every node; the key as it was, or null when there was none. */
  async delete(
    id: string,
    manager: EntityManager = this.dataSource.manager,
  ): Promise<ApiKeyListing | null> {
    const rows = await manager.query<ApiKeyListing[]>(
      `WITH deleted AS (DELETE FROM api_key WHERE id = $1 RETURNING *)
       SELECT ${LISTED_COLUMNS} FROM deleted
       CROSS JOIN (SELECT pg_notify('${API_KEY_CHANGED_CHANNEL}', $2::text || id) FROM deleted) AS notified`,
      [id, this.sender],
    );
    return rows[0] ?? null;
  }

  /** Called after a deletion committed in this process: this node's caches hear it at once. */
  deleted(id: string): void {
    this.events?.deliverHere(API_KEY_CHANGED_CHANNEL, id);
  }

  /** Records a use; never moves the time backwards when nodes race. */
  async touch(id: string, at: Date): Promise<void> {
    await this.dataSource.query(
      'UPDATE api_key SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2)',
      [id, at],
    );
  }
}
