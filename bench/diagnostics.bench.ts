/**
 * Diagnostics behind the headline figures: how many PostgreSQL round trips one submission costs,
 * what the database alone can do with the submission's rows, and (--profile) where a ROLE=api
 * node spends its CPU while acknowledging.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BenchDatabase } from './bench-database';
import { printProfileSummary, ProfileSummary, summariseProfile } from './cpu-profile';
import { ProbeResult } from './database-probe';
import { MessageCounts, PgMessageCounter } from './pg-message-counter';
import { heading, table } from './report';
import { submitZip } from './rest-client';
import { ServiceNode } from './service-node';
import { round } from './stats';
import { LoadResult, postLoad } from './submission.bench';

export interface RoundTrips {
  submissions: number;
  roundTripsPerSubmission: number;
  simpleQueriesPerSubmission: number;
  extendedQueriesPerSubmission: number;
  statements: MessageCounts['statements'];
}

/** ROLE=api through the counting proxy: sequential submissions, protocol messages per submission. */
export async function countRoundTrips(
  database: BenchDatabase,
  zip: Buffer,
  main: string,
  track: (node: ServiceNode | null) => void,
): Promise<RoundTrips> {
  const submissions = 200;
  const proxy = await PgMessageCounter.start(
    '127.0.0.1',
    Number(new URL(database.url).port || 5432),
  );
  let node: ServiceNode | null = null;
  try {
    await database.empty();
    node = await ServiceNode.start({
      role: 'api',
      databaseUrl: database.urlVia(proxy.port),
      scriptSlots: 0,
      main,
    });
    track(node);
    for (let i = 0; i < 20; i += 1) {
      await submitZip(node.url, zip);
    }
    proxy.take();
    for (let i = 0; i < submissions; i += 1) {
      await submitZip(node.url, zip);
    }
    const counts = proxy.take();
    return {
      submissions,
      roundTripsPerSubmission: counts.roundTrips / submissions,
      simpleQueriesPerSubmission: counts.simpleQueries / submissions,
      extendedQueriesPerSubmission: counts.extendedQueries / submissions,
      statements: Object.fromEntries(
        Object.entries(counts.statements).map(([sql, n]) => [sql, n / submissions]),
      ),
    };
  } finally {
    await node?.stop();
    track(null);
    await proxy.stop();
  }
}

export interface Profile {
  connections: number;
  load: LoadResult;
  summary: ProfileSummary;
}

/** ROLE=api under --cpu-prof at the highest concurrency: where the node's CPU goes. */
export interface ProfileOptions {
  connections: number;
  warmUpS: number;
  durationS: number;
  main: string;
}

export async function profileApi(
  database: BenchDatabase,
  zip: Buffer,
  options: ProfileOptions,
  track: (node: ServiceNode | null) => void,
): Promise<Profile> {
  const { connections } = options;
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-prof-'));
  try {
    await database.empty();
    const node = await ServiceNode.start({
      role: 'api',
      databaseUrl: database.url,
      scriptSlots: 0,
      main: options.main,
      execArgv: ['--cpu-prof', '--cpu-prof-dir', dir],
    });
    track(node);
    let load: LoadResult;
    let fromUs: number;
    let toUs: number;
    try {
      await postLoad(node.url, zip, 16, options.warmUpS);
      fromUs = Number(process.hrtime.bigint() / 1000n);
      load = await postLoad(node.url, zip, connections, options.durationS);
      toUs = Number(process.hrtime.bigint() / 1000n);
    } finally {
      await node.stop();
      track(null);
    }
    const file = readdirSync(dir).find((name) => name.endsWith('.cpuprofile'));
    if (!file) {
      throw new Error('the node wrote no CPU profile');
    }
    return { connections, load, summary: summariseProfile(join(dir, file), fromUs, toUs) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function printDiagnostics(
  roundTrips: RoundTrips,
  probes: ProbeResult[],
  profile: Profile | null,
  probeDurationS: number,
  log: (line: string) => void,
): void {
  log(heading('Where an acknowledgement spends its time'));
  log(
    `PostgreSQL round trips per submission (ROLE=api, ${roundTrips.submissions} sequential, counted by a protocol proxy): ` +
      `${round(roundTrips.roundTripsPerSubmission, 2)} ` +
      `(${round(roundTrips.simpleQueriesPerSubmission, 2)} simple, ${round(roundTrips.extendedQueriesPerSubmission, 2)} extended)`,
  );
  for (const [sql, n] of Object.entries(roundTrips.statements)) {
    log(`  ${round(n, 2)} x ${sql}`);
  }
  log(
    `\nThe submission's rows written by pg clients alone (no HTTP, no Nest), ${probeDurationS} s each:`,
  );
  log(
    table(
      ['shape', 'connections', 'tx/s', 'p50 ms', 'p99 ms', 'pg CPU/tx ms'],
      probes.map((p) => [
        p.shape,
        String(p.connections),
        String(round(p.perSecond, 0)),
        String(round(p.latencyMs.p50, 2)),
        String(round(p.latencyMs.p99, 2)),
        String(round(p.postgresCpuPerTransactionMs, 3)),
      ]),
    ),
  );
  if (profile) {
    log(
      `\nCPU profile of a ROLE=api node at concurrency ${profile.connections} ` +
        `(${round(profile.load.acksPerSecond, 0)} acks/s while profiled; self time by package, % of busy time):`,
    );
    printProfileSummary(profile.summary, profile.load.acknowledged, 'ack', log);
  }
}
