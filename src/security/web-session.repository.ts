import { createHash, randomBytes } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';

/** A signed-in browser: who, with which roles (as of the sign-in), until when. */
export interface WebSession {
  principal: string;
  roles: string[];
  expiresAt: Date;
}

function hashOf(id: string): string {
  return createHash('sha256').update(id).digest('hex');
}

/**
 * Every statement about web_session (see web-session.entity.ts). Ids are random, 256 bits. Rows
 * are made for signed-in principals only: a sign-in under way lives in its sealed cookie.
 */
@Injectable()
export class WebSessionRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** A new session (a new id: never the one of the sign-in, against session fixation). */
  async create(
    principal: string,
    roles: readonly string[],
    lifetimeMs: number,
    manager: EntityManager = this.dataSource.manager,
  ): Promise<string> {
    const id = randomBytes(32).toString('base64url');
    await manager.query(
      `INSERT INTO web_session (id_hash, principal, roles, sign_in, created_at, expires_at)
       VALUES ($1, $2, $3, NULL, now(), now() + $4 * interval '1 millisecond')`,
      [hashOf(id), principal, JSON.stringify(roles), lifetimeMs],
    );
    return id;
  }

  async find(id: string): Promise<WebSession | null> {
    const rows = await this.dataSource.query<
      Array<{ principal: string; roles: string[]; expires_at: Date }>
    >(
      `SELECT principal, roles, expires_at FROM web_session
        WHERE id_hash = $1 AND principal IS NOT NULL AND expires_at > now()`,
      [hashOf(id)],
    );
    const row = rows[0];
    return row ? { principal: row.principal, roles: row.roles, expiresAt: row.expires_at } : null;
  }

  /** Removes a session; the principal it named, or null when there was none. */
  async delete(
    id: string,
    manager: EntityManager = this.dataSource.manager,
  ): Promise<string | null> {
    // A row of an older version may still hold a sign-in under way: it names nobody.
    const rows = await manager.query<Array<{ principal: string | null }>>(
      `WITH gone AS (
         DELETE FROM web_session WHERE id_hash = $1
          RETURNING CASE WHEN sign_in IS NULL THEN principal END AS principal)
       SELECT principal FROM gone`,
      [hashOf(id)],
    );
    return rows[0]?.principal ?? null;
  }

  /** Removes expired rows (web_session_expires_idx); called on each sign-in, which is rare. */
  async deleteExpired(): Promise<void> {
    await this.dataSource.query('DELETE FROM web_session WHERE expires_at <= now()');
  }
}
