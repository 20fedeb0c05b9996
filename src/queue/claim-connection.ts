import { Logger } from '@nestjs/common';
import { Pool, PoolClient } from 'pg';

/** How the claim's connection names itself in pg_stat_activity. */
export const CLAIM_APPLICATION_NAME = 'svc-claim';

/**
 * The claim's own connection, for a node that reaches PostgreSQL directly (no pooler, not the
 * embedded database). Its session plans parameterised statements once:
 * `plan_cache_mode = force_generic_plan`. PostgreSQL would otherwise plan the claim, a statement
 * of some sixty plan nodes, again on every call (custom plans: the generic one, its LIMITs
 * unknown, is estimated dearer), which took about twice the claim's execution time. The setting
 * is the session's, so only the claim runs here: every other statement keeps the pool's custom
 * plans. One connection, kept open while the node runs; a node claims one batch at a time.
 *
 * Its commits do not wait for the WAL to reach the disk (`synchronous_commit = off`): about a
 * millisecond less before each claimed job starts. A claim lost to a crash of PostgreSQL (only
 * then: the server crashing, not the node) leaves the job QUEUED as if it had not been claimed;
 * the worker that claimed it finds its lease gone at its next heartbeat or when it stores the
 * result, which is then rejected, and the job runs again: the at-least-once a lost lease always
 * meant (docs/queue.md). Every statement that stores something a client is told of (a job, a
 * result) still commits durably, and its commit also makes the claims before it durable.
 */
export class ClaimConnection {
  private readonly logger = new Logger(ClaimConnection.name);
  private readonly pool: Pool;

  constructor(url: string) {
    this.pool = new Pool({
      connectionString: url,
      max: 1,
      connectionTimeoutMillis: 3000,
      // Kept open: a new connection would plan the claim again.
      idleTimeoutMillis: 0,
      application_name: CLAIM_APPLICATION_NAME,
      options: '-c plan_cache_mode=force_generic_plan -c synchronous_commit=off',
    });
    // Every connection lost, idle or during a claim, is logged once by its own listener: a
    // claim then fails and releases it broken (QueueRepository); an idle one the pool drops.
    // Either way the next claim opens another. Unheard, the 'error' would end the process.
    this.pool.on('connect', (client) =>
      client.on('error', (error) =>
        this.logger.warn(`the claim's connection was lost: ${error.message}`),
      ),
    );
    // The pool repeats an idle connection's error; its client's listener has logged it.
    this.pool.on('error', () => undefined);
  }

  connect(): Promise<PoolClient> {
    return this.pool.connect();
  }

  close(): Promise<void> {
    return this.pool.end();
  }
}
