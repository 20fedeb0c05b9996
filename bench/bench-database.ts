/** The benchmark's own database on the local PostgreSQL: created per run, emptied between measurements, dropped at the end. */
import { Client } from 'pg';

/** The server every benchmark runs against (loopback only). */
export const ADMIN_URL =
  process.env.BENCH_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export class BenchDatabase {
  private constructor(
    readonly name: string,
    readonly url: string,
    private readonly client: Client,
  ) {}

  /** `suffix` tells apart two databases made by one process in the same second. */
  static async create(suffix = ''): Promise<BenchDatabase> {
    const admin = new URL(ADMIN_URL);
    if (!['127.0.0.1', 'localhost', '[::1]'].includes(admin.hostname)) {
      throw new Error(
        `the benchmark only runs against a loopback PostgreSQL, not ${admin.hostname}`,
      );
    }
    const name = `svc_bench_${new Date().toISOString().replace(/\D/g, '').slice(0, 14)}_${process.pid}${suffix}`;
    const client = new Client({ connectionString: ADMIN_URL });
    await client.connect();
    try {
      await client.query(`CREATE DATABASE ${name}`);
    } finally {
      await client.end();
    }
    const url = new URL(ADMIN_URL);
    url.pathname = `/${name}`;
    const own = new Client({ connectionString: url.toString(), application_name: 'svc-bench' });
    await own.connect();
    return new BenchDatabase(name, url.toString(), own);
  }

  /** The same database through another host and port (the message-counting proxy). */
  urlVia(port: number): string {
    const url = new URL(this.url);
    url.hostname = '127.0.0.1';
    url.port = String(port);
    return url.toString();
  }

  async query<T extends object>(sql: string, params: unknown[] = []): Promise<T[]> {
    return (await this.client.query<T>(sql, params)).rows;
  }

  /** Removes every job and result, so that each measurement starts from an empty queue. */
  async empty(): Promise<void> {
    const [row] = await this.query<{ exists: boolean }>(
      "SELECT to_regclass('job') IS NOT NULL AS exists",
    );
    if (row.exists) {
      // Before the first node has run the migrations there is nothing to empty.
      // CASCADE: the chunk tables reference job_file and result.
      await this.client.query('TRUNCATE job, job_file, result CASCADE');
    }
  }

  /** Server process ids of the service's connections (to read their CPU time). */
  async backendPids(): Promise<number[]> {
    const rows = await this.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
      [this.name],
    );
    return rows.map((row) => row.pid);
  }

  async drop(): Promise<void> {
    await this.client.end().catch(() => undefined);
    const admin = new Client({ connectionString: ADMIN_URL });
    await admin.connect();
    try {
      await admin.query(`DROP DATABASE IF EXISTS ${this.name} WITH (FORCE)`);
    } finally {
      await admin.end();
    }
  }
}
