import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * A running worker node as its heartbeat describes it (WorkerNodeHeartbeat of the worker module
 * writes it every few seconds and deletes it when the node stops): what the console shows of
 * the workers. A row whose heartbeat is old is a node that died.
 */
@Entity({ name: 'worker_node' })
export class WorkerNodeEntity {
  @PrimaryColumn({
    name: 'node_id',
    type: 'varchar',
    length: 128,
    primaryKeyConstraintName: 'worker_node_pk',
  })
  nodeId!: string;

  /** ROLE of the node: worker or all. */
  @Column({ type: 'varchar', length: 16 }) role!: string;

  /** R_ENGINE: native or webr. */
  @Column({ name: 'r_engine', type: 'varchar', length: 16 }) rEngine!: string;

  /** Its R slots (script, function-call and per-application slots). */
  @Column({ type: 'int' }) slots!: number;

  /** Of those, how many run a job now. */
  @Column({ type: 'int' }) busy!: number;

  @Column({ name: 'heartbeat_at', type: 'timestamptz' }) heartbeatAt!: Date;

  /** The service's version the node runs (null: written by a node from before it was kept). */
  @Column({ type: 'varchar', length: 64, nullable: true }) version!: string | null;

  /** When the node's process started. */
  @Column({ name: 'started_at', type: 'timestamptz', nullable: true }) startedAt!: Date | null;

  /** The node process's resident memory at its last heartbeat, in bytes (its R processes not counted). */
  @Column({ name: 'memory_bytes', type: 'bigint', nullable: true }) memoryBytes!: string | null;
}
