/**
 * `npm run bench:db-cost`: the database cost of one job, measured on a private, otherwise idle
 * PostgreSQL cluster that this script creates (initdb in a temporary directory, a free loopback
 * port, pg_stat_statements preloaded) and removes at the end. docs/scaling.md holds the figures.
 *
 * Each phase is a fresh svc node (ROLE=api, or ROLE=all for running the jobs) connected through a
 * message-counting proxy, started, given its work, and stopped; its figures minus those of the
 * same role started and stopped with no work are the cost of the work:
 * - round trips (Query and Sync messages), statements (pg_stat_statements calls);
 * - transactions committed and rows inserted, updated, deleted (pg_stat_database and
 *   pg_stat_user_tables, complete once the node's connections have closed);
 * - WAL bytes: pg_current_wal_lsn() before and after (autovacuum off, so the cluster writes
 *   nothing else), and the statements' own wal_bytes.
 * Phases: submit (POST /jobs), run (claim, heartbeat, complete), fetch (result metadata and
 * data), delete (DELETE /results); and an idle node's background rate per second.
 *
 * Options: --jobs N (default 200, at most 1000), --idle-seconds S (default 20).
 */
import { execFileSync, spawn, ChildProcess } from 'node:child_process';
import { chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Client } from 'pg';
import { smallScriptZip } from './job-archives';
import { PgMessageCounter } from './pg-message-counter';
import { heading, table } from './report';
import { APPLICATION, fetchResult, submitZip } from './rest-client';
import { freePort, PROJECT_ROOT, Role, ServiceNode } from './service-node';
import { optionInt, round } from './stats';

const PG_BIN = process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin';
const DATABASE = 'svc_dbcost';
/** The service connects as this role, the bench observes as postgres: only svc's statements count. */
const SERVICE_ROLE = 'svc';
const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' })) || 100;

interface Snapshot {
  lsn: string;
  xactCommit: number;
  rows: Record<string, { ins: number; upd: number; del: number }>;
}

interface Cost {
  /** CPU milliseconds of the server processes that served the node (reaped by the postmaster). */
  cpuMs: number;
  roundTrips: number;
  statements: number;
  commits: number;
  walBytes: number;
  statementWalBytes: number;
  /** Per table: rows inserted, updated, deleted. */
  rows: Record<string, { ins: number; upd: number; del: number }>;
  /** SQL (first 120 characters) -> calls and execution time, for the statements the work sent. */
  topStatements: Array<{ sql: string; calls: number; execMs: number }>;
  /** Execution time of the claim statement(s): the one hot-path statement that takes jobs. */
  claimMs: number;
  /** Planning time of the claim statement(s). */
  claimPlanMs: number;
  /** Most connections the node held at once (sampled). */
  peakConnections: number;
  seconds: number;
}

/** Runs a command as postgres when this process is root (PostgreSQL refuses to run as root). */
function asPostgres(command: string, args: string[]): [string, string[]] {
  return process.getuid?.() === 0
    ? ['runuser', ['-u', 'postgres', '--', command, ...args]]
    : [command, args];
}

class PrivateCluster {
  private constructor(
    private readonly dir: string,
    private readonly child: ChildProcess,
    readonly port: number,
  ) {}

  static async start(): Promise<PrivateCluster> {
    const dir = mkdtempSync(join(tmpdir(), 'svc-dbcost-'));
    const data = join(dir, 'data');
    mkdirSync(data);
    if (process.getuid?.() === 0) {
      const id = (flag: string): number =>
        Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }));
      chownSync(dir, id('-u'), id('-g'));
      chownSync(data, id('-u'), id('-g'));
    }
    const [initdb, initArgs] = asPostgres(join(PG_BIN, 'initdb'), [
      '-D',
      data,
      '-U',
      'postgres',
      '--auth=trust',
      '--no-sync',
    ]);
    execFileSync(initdb, initArgs, { stdio: 'ignore' });
    const port = await freePort();
    writeFileSync(
      join(data, 'postgresql.auto.conf'),
      [
        `port = ${port}`,
        "listen_addresses = '127.0.0.1'",
        `unix_socket_directories = '${dir}'`,
        "shared_preload_libraries = 'pg_stat_statements'",
        // Statements as svc sends them (the work of foreign keys and cascades is in theirs).
        'pg_stat_statements.track = top',
        // Planning counts too: a statement planned on every call costs that each time.
        'pg_stat_statements.track_planning = on',
        // Nothing but the measured work writes WAL.
        'autovacuum = off',
        '',
      ].join('\n'),
    );
    const [postgres, args] = asPostgres(join(PG_BIN, 'postgres'), ['-D', data]);
    const child = spawn(postgres, args, { stdio: 'ignore' });
    const cluster = new PrivateCluster(dir, child, port);
    for (let i = 0; ; i += 1) {
      try {
        const client = await cluster.connect('postgres');
        await client.end();
        return cluster;
      } catch (error) {
        if (i > 100) {
          await cluster.stop();
          throw error;
        }
        await sleep(100);
      }
    }
  }

  /**
   * CPU milliseconds of the postmaster's exited children: a backend's CPU is added when it ends,
   * so after a node's connections have closed this holds their work.
   */
  reapedCpuMs(): number {
    const pid = readFileSync(join(this.dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0];
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 16 and 17 of stat (cutime, cstime), counted from the state (field 3) here.
    return ((Number(fields[13]) + Number(fields[14])) * 1000) / CLOCK_TICKS;
  }

  url(database: string, user = 'postgres', port = this.port): string {
    return `postgres://${user}@127.0.0.1:${port}/${database}`;
  }

  async connect(database: string): Promise<Client> {
    const client = new Client({ connectionString: this.url(database) });
    await client.connect();
    return client;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null) {
      // SIGINT: fast shutdown, sent to the postmaster itself (its pid is the first line of
      // postmaster.pid): as root the child is runuser, which does not pass SIGINT on.
      const exited = new Promise((resolve) => this.child.once('exit', resolve));
      const postmaster = Number(
        readFileSync(join(this.dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0],
      );
      process.kill(
        Number.isInteger(postmaster) && postmaster > 0 ? postmaster : (this.child.pid ?? 0),
        'SIGINT',
      );
      await exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Reads the figures from the `postgres` database, so that its own queries are no transactions of
 * the measured database; the table statistics, which only the database itself shows, are read on
 * a short connection per snapshot (its one transaction is in every phase and the baseline alike).
 */
class Observer {
  constructor(
    private readonly server: Client,
    private readonly tables: () => Promise<Client>,
  ) {}

  async snapshot(): Promise<Snapshot> {
    const { rows: wal } = await this.server.query<{ lsn: string; commits: string }>(
      `SELECT pg_current_wal_lsn()::text AS lsn, xact_commit::text AS commits
         FROM pg_stat_database WHERE datname = $1`,
      [DATABASE],
    );
    const local = await this.tables();
    try {
      const { rows: tables } = await local.query<{
        relname: string;
        ins: string;
        upd: string;
        del: string;
      }>(
        'SELECT relname, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_del AS del FROM pg_stat_user_tables',
      );
      return {
        lsn: wal[0].lsn,
        xactCommit: Number(wal[0].commits),
        rows: Object.fromEntries(
          tables.map((t) => [
            t.relname,
            { ins: Number(t.ins), upd: Number(t.upd), del: Number(t.del) },
          ]),
        ),
      };
    } finally {
      await local.end();
    }
  }

  async walBytesBetween(from: string, to: string): Promise<number> {
    const { rows } = await this.server.query<{ bytes: string }>(
      'SELECT pg_wal_lsn_diff($2::pg_lsn, $1::pg_lsn)::text AS bytes',
      [from, to],
    );
    return Number(rows[0].bytes);
  }

  async resetStatements(): Promise<void> {
    await this.server.query('SELECT pg_stat_statements_reset()');
  }

  /** The service's statements in the measured database since the last reset. */
  async statements(): Promise<
    Array<{ query: string; calls: number; walBytes: number; execMs: number; planMs: number }>
  > {
    const { rows } = await this.server.query<{
      query: string;
      calls: string;
      wal_bytes: string;
      exec_ms: string;
      plan_ms: string;
    }>(
      `SELECT query, calls::text, wal_bytes::text, total_exec_time::text AS exec_ms,
              total_plan_time::text AS plan_ms FROM pg_stat_statements
        WHERE userid = $1::regrole AND dbid = (SELECT oid FROM pg_database WHERE datname = $2)
        ORDER BY calls DESC`,
      [SERVICE_ROLE, DATABASE],
    );
    return rows.map((row) => ({
      query: row.query.replace(/\s+/g, ' ').trim(),
      calls: Number(row.calls),
      walBytes: Number(row.wal_bytes),
      execMs: Number(row.exec_ms),
      planMs: Number(row.plan_ms),
    }));
  }

  async connections(): Promise<number> {
    const { rows } = await this.server.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = $1',
      [SERVICE_ROLE],
    );
    return rows[0].n;
  }

  /** Jobs completed since the last reset: calls of the statement that stores a result. */
  async completedJobs(): Promise<number> {
    return (await this.statements())
      .filter((statement) => statement.query.startsWith('WITH done AS ( UPDATE job SET state'))
      .reduce((sum, statement) => sum + statement.calls, 0);
  }
}

function parseOptions(): { jobs: number; idleSeconds: number } {
  const { values } = parseArgs({
    options: {
      jobs: { type: 'string', default: '200' },
      'idle-seconds': { type: 'string', default: '20' },
    },
    strict: true,
  });
  return {
    jobs: optionInt('jobs', values.jobs, 1, 1000),
    idleSeconds: optionInt('idle-seconds', values['idle-seconds'], 1, 120),
  };
}

function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

async function main(): Promise<void> {
  const options = parseOptions();
  const cluster = await PrivateCluster.start();
  const admin = await cluster.connect('postgres');
  await admin.query(`CREATE ROLE ${SERVICE_ROLE} LOGIN SUPERUSER`);
  await admin.query(`CREATE DATABASE ${DATABASE} OWNER ${SERVICE_ROLE}`);
  await admin.end();
  const observerClient = await cluster.connect('postgres');
  await observerClient.query('CREATE EXTENSION pg_stat_statements');
  const observer = new Observer(observerClient, () => cluster.connect(DATABASE));
  const counter = await PgMessageCounter.start('127.0.0.1', cluster.port);
  const nodes = new Set<ServiceNode>();
  const interrupt = (): void => {
    for (const node of nodes) {
      node.kill();
    }
    void cluster.stop().finally(() => process.exit(130));
  };
  process.once('SIGINT', interrupt);
  try {
    const { zip } = await smallScriptZip();
    const env = {
      // LISTEN straight to the cluster: a session, which the counted path may not need.
      DATABASE_LISTEN_URL: cluster.url(DATABASE, SERVICE_ROLE),
    };
    /** One node through the counter: started, given `work`, stopped; what it cost. */
    const measure = async (
      role: Role,
      work: (node: ServiceNode) => Promise<void>,
    ): Promise<Cost> => {
      await observer.resetStatements();
      const before = await observer.snapshot();
      const cpuBefore = cluster.reapedCpuMs();
      counter.take();
      const started = Date.now();
      const node = await ServiceNode.start({
        role,
        databaseUrl: cluster.url(DATABASE, SERVICE_ROLE, counter.port),
        scriptSlots: 2,
        env,
      });
      nodes.add(node);
      let peak = 0;
      const sampler = setInterval(() => {
        void observer.connections().then(
          (n) => (peak = Math.max(peak, n)),
          () => undefined,
        );
      }, 200);
      try {
        await work(node);
      } finally {
        clearInterval(sampler);
        await node.stop();
        nodes.delete(node);
      }
      // The node's backends report their table statistics as they exit.
      while ((await observer.connections()) > 0) {
        await sleep(50);
      }
      await sleep(200);
      const seconds = (Date.now() - started) / 1000;
      const counts = counter.take();
      const statements = await observer.statements();
      const after = await observer.snapshot();
      const rows: Cost['rows'] = {};
      for (const [table, now] of Object.entries(after.rows)) {
        const was = before.rows[table] ?? { ins: 0, upd: 0, del: 0 };
        const delta = { ins: now.ins - was.ins, upd: now.upd - was.upd, del: now.del - was.del };
        if (delta.ins || delta.upd || delta.del) {
          rows[table] = delta;
        }
      }
      return {
        cpuMs: cluster.reapedCpuMs() - cpuBefore,
        roundTrips: counts.roundTrips,
        statements: statements.reduce((sum, statement) => sum + statement.calls, 0),
        commits: after.xactCommit - before.xactCommit,
        walBytes: await observer.walBytesBetween(before.lsn, after.lsn),
        statementWalBytes: statements.reduce((sum, statement) => sum + statement.walBytes, 0),
        rows,
        topStatements: statements.map((statement) => ({
          sql: statement.query.slice(0, 120),
          calls: statement.calls,
          execMs: statement.execMs,
        })),
        claimMs: statements
          .filter((statement) => statement.query.includes('FOR UPDATE SKIP LOCKED'))
          .reduce((sum, statement) => sum + statement.execMs, 0),
        claimPlanMs: statements
          .filter((statement) => statement.query.includes('FOR UPDATE SKIP LOCKED'))
          .reduce((sum, statement) => sum + statement.planMs, 0),
        peakConnections: peak,
        seconds,
      };
    };

    log(
      `svc database cost per job: ${options.jobs} jobs on a private PostgreSQL (port ${cluster.port})`,
    );
    // The schema, made by the first node; not measured.
    await measure('api', () => Promise.resolve());
    const baseline = {
      api: await measure('api', () => Promise.resolve()),
      all: await measure('all', () => Promise.resolve()),
    };
    const jobIds: string[] = [];
    const phases: Record<string, Cost> = {};
    phases.submit = await measure('api', async (node) => {
      for (let i = 0; i < options.jobs; i += 1) {
        jobIds.push((await submitZip(node.url, zip)).jobId);
      }
    });
    phases.run = await measure('all', async () => {
      const deadline = Date.now() + 600_000;
      while ((await observer.completedJobs()) < options.jobs) {
        if (Date.now() > deadline) {
          throw new Error('the jobs did not finish within 10 minutes');
        }
        await sleep(100);
      }
    });
    phases.fetch = await measure('api', async (node) => {
      for (const jobId of jobIds) {
        const result = await fetchResult(
          `${node.url}/svc/api/rest/results/${APPLICATION}/${jobId}`,
        );
        const data = await fetch(result?.dataUri ?? '');
        if (data.status !== 200) {
          throw new Error(`result data of ${jobId} answered ${data.status}`);
        }
        await data.arrayBuffer();
      }
    });
    phases.delete = await measure('api', async (node) => {
      for (const jobId of jobIds) {
        const answer = await fetch(`${node.url}/svc/api/rest/results/${APPLICATION}/${jobId}`, {
          method: 'DELETE',
        });
        if (answer.status >= 300) {
          throw new Error(`DELETE of ${jobId} answered ${answer.status}`);
        }
      }
    });
    const idle = {
      api: await measure('api', () => sleep(options.idleSeconds * 1000)),
      all: await measure('all', () => sleep(options.idleSeconds * 1000)),
    };
    report(options, baseline, phases, idle);
  } finally {
    process.off('SIGINT', interrupt);
    for (const node of nodes) {
      node.kill();
    }
    await counter.stop();
    await observerClient.end().catch(() => undefined);
    await cluster.stop();
  }
}

function report(
  options: { jobs: number; idleSeconds: number },
  baseline: Record<'api' | 'all', Cost>,
  phases: Record<string, Cost>,
  idle: Record<'api' | 'all', Cost>,
): void {
  const roleOf = (phase: string): 'api' | 'all' => (phase === 'run' ? 'all' : 'api');
  const perJob = (phase: string, pick: (cost: Cost) => number): number =>
    (pick(phases[phase]) - pick(baseline[roleOf(phase)])) / options.jobs;
  const figure = (phase: string, pick: (cost: Cost) => number, digits: number): string =>
    String(round(perJob(phase, pick), digits));
  const figures = Object.keys(phases).map((phase) => [
    phase,
    figure(phase, (c) => c.cpuMs, 2),
    figure(phase, (c) => c.roundTrips, 2),
    figure(phase, (c) => c.statements, 2),
    figure(phase, (c) => c.commits, 2),
    figure(phase, (c) => c.walBytes, 0),
    figure(phase, (c) => c.statementWalBytes, 0),
    String(phases[phase].peakConnections),
  ]);
  log(heading(`Per job (${options.jobs} jobs, start-up and shutdown of an idle node subtracted)`));
  log(
    table(
      [
        'phase',
        'PG CPU ms',
        'round trips',
        'statements',
        'commits',
        'WAL bytes',
        'stmt WAL bytes',
        'peak conns',
      ],
      figures,
    ),
  );
  log(heading('Rows per job (inserted/updated/deleted)'));
  const rows: string[][] = [];
  for (const phase of Object.keys(phases)) {
    for (const [table, delta] of Object.entries(phases[phase].rows)) {
      const base = baseline[roleOf(phase)].rows[table] ?? { ins: 0, upd: 0, del: 0 };
      const f = (n: number, b: number): string => String(round((n - b) / options.jobs, 2));
      rows.push([
        phase,
        table,
        f(delta.ins, base.ins),
        f(delta.upd, base.upd),
        f(delta.del, base.del),
      ]);
    }
  }
  log(table(['phase', 'table', 'inserted', 'updated', 'deleted'], rows));
  log(heading('Statements sent per phase (calls / jobs, execution ms / jobs)'));
  for (const phase of Object.keys(phases)) {
    log(`${phase}:`);
    for (const statement of phases[phase].topStatements.slice(0, 6)) {
      log(
        `  ${round(statement.calls / options.jobs, 2)}  ${round(statement.execMs / options.jobs, 3)} ms  ${statement.sql}`,
      );
    }
  }
  const claim = phases.run;
  log(
    `claim: ${round((claim.claimPlanMs + claim.claimMs) / options.jobs, 3)} ms per job: ` +
      `${round(claim.claimPlanMs / options.jobs, 3)} planning + ${round(claim.claimMs / options.jobs, 3)} execution ` +
      '(pg_stat_statements, the statements with FOR UPDATE SKIP LOCKED)',
  );
  log(
    heading(
      `An idle node's background, per second (${options.idleSeconds} s, baseline subtracted)`,
    ),
  );
  log(
    table(
      [
        'role',
        'PG CPU ms/s',
        'round trips/s',
        'statements/s',
        'commits/s',
        'WAL bytes/s',
        'peak conns',
      ],
      (['api', 'all'] as const).map((role) => {
        const rate = (pick: (cost: Cost) => number): string =>
          String(round((pick(idle[role]) - pick(baseline[role])) / options.idleSeconds, 2));
        return [
          role,
          rate((c) => c.cpuMs),
          rate((c) => c.roundTrips),
          rate((c) => c.statements),
          rate((c) => c.commits),
          rate((c) => c.walBytes),
          String(idle[role].peakConnections),
        ];
      }),
    ),
  );
  log(heading('Machine'));
  log(
    `${cpus()[0]?.model ?? 'unknown'}, ${cpus().length} cores, ${round(totalmem() / 2 ** 30, 1)} GiB; ${PROJECT_ROOT}`,
  );
  const out = join(PROJECT_ROOT, 'bench', 'results');
  mkdirSync(out, { recursive: true });
  const file = join(
    out,
    `db-cost-${new Date().toISOString().replace(/\D/g, '').slice(0, 14)}.json`,
  );
  writeFileSync(file, JSON.stringify({ options, baseline, phases, idle }, null, 2));
  log(`raw figures: ${file}`);
}

main().catch((error: unknown) => {
  process.stderr.write(
    `${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
