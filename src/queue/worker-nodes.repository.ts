import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { rJob } from './queue-reads';
import { WorkerNodeEntity } from './worker-node.entity';

/** What a worker node reports with each heartbeat. */
export type WorkerNodeReport = Omit<WorkerNodeEntity, 'heartbeatAt' | 'memoryBytes'> & {
  memoryBytes: number;
};

/** A worker node as the console lists it: its heartbeat, and the R jobs it runs now. */
export interface WorkerNodeState extends Omit<WorkerNodeEntity, 'memoryBytes'> {
  memoryBytes: number | null;
  /** Its running R jobs of the applications asked for (all of them: null), oldest start first. */
  runningJobs: Array<{ applicationName: string; jobId: string; startedAt: Date }>;
}

/**
 * The `worker_node` table: each worker's heartbeat (written by the worker module's
 * WorkerNodeHeartbeat), read by the console's overview.
 */
@Injectable()
export class WorkerNodesRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** Records the node's heartbeat now (one upsert). */
  async beat(report: WorkerNodeReport): Promise<void> {
    await this.dataSource.query(
      `INSERT INTO worker_node (node_id, role, r_engine, slots, busy, heartbeat_at, version,
                               started_at, memory_bytes)
       VALUES ($1, $2, $3, $4, $5, now(), $6, $7, $8)
       ON CONFLICT (node_id) DO UPDATE SET role = excluded.role, r_engine = excluded.r_engine,
              slots = excluded.slots, busy = excluded.busy, heartbeat_at = excluded.heartbeat_at,
              version = excluded.version, started_at = excluded.started_at,
              memory_bytes = excluded.memory_bytes`,
      [
        report.nodeId,
        report.role,
        report.rEngine,
        report.slots,
        report.busy,
        report.version,
        report.startedAt,
        report.memoryBytes,
      ],
    );
  }

  /** Forgets the node (it stops). */
  async remove(nodeId: string): Promise<void> {
    await this.dataSource.query('DELETE FROM worker_node WHERE node_id = $1', [nodeId]);
  }

  /**
   * Every node with a row, by id, its busy slots its running R jobs, with the database's time (heartbeats and staleness are measured
   * on the database's clock, which every node shares). Rows of nodes silent for an hour go first.
   * `applications`: whose running jobs each node names (null: every application's); busy counts
   * them all, so an application admin sees how full a node is, not whose jobs fill it.
   */
  async list(
    applications: readonly string[] | null = null,
  ): Promise<{ nodes: WorkerNodeState[]; now: Date }> {
    await this.dataSource.query(
      "DELETE FROM worker_node WHERE heartbeat_at < now() - interval '1 hour'",
    );
    const rows = await this.dataSource.query<
      Array<{
        node_id: string;
        role: string;
        r_engine: string;
        slots: number;
        busy: number;
        heartbeat_at: Date;
        version: string | null;
        started_at: Date | null;
        memory_bytes: string | null;
        running: Array<{ a: string; j: string; s: string }>;
        now: Date;
      }>
    >(
      // Busy slots are counted from the running jobs the node holds, as the overview counts each
      // application's running jobs, not from the heartbeat: one source, no 10 s of disagreement.
      // The running jobs are few (their partial index job_lease_idx), one per busy slot.
      `SELECT w.node_id, w.role, w.r_engine, w.slots, w.heartbeat_at, w.version, w.started_at,
              w.memory_bytes, now() AS now,
              (SELECT count(*) FROM job j
                WHERE j.state = 'RUNNING' AND j.lease_owner = w.node_id AND ${rJob('j.kind')})::int
                AS busy,
              (SELECT coalesce(json_agg(json_build_object('a', j.application_name, 'j', j.id,
                                                          's', j.started_at)
                                        ORDER BY j.started_at, j.id), '[]'::json)
                 FROM job j
                WHERE j.state = 'RUNNING' AND j.lease_owner = w.node_id AND ${rJob('j.kind')}
                  AND ($1::varchar[] IS NULL OR j.application_name = ANY($1::varchar[])))
                AS running
         FROM worker_node w ORDER BY w.node_id`,
      [applications],
    );
    const now = rows[0]?.now ?? new Date();
    return {
      now,
      nodes: rows.map((row) => ({
        nodeId: row.node_id,
        role: row.role,
        rEngine: row.r_engine,
        slots: row.slots,
        busy: row.busy,
        heartbeatAt: row.heartbeat_at,
        version: row.version,
        startedAt: row.started_at,
        memoryBytes: row.memory_bytes === null ? null : Number(row.memory_bytes),
        runningJobs: row.running.map((job) => ({
          applicationName: job.a,
          jobId: job.j,
          startedAt: new Date(job.s),
        })),
      })),
    };
  }
}
