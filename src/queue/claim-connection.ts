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
      options: '-c plan_cache_mode=force_generic_plan',
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
