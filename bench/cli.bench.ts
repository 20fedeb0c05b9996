/**
 * The command line beside a running service: how long `svc <command>` takes, from the spawn of
 * its process to its exit, against a node on the embedded database (the command is a client of
 * the node's socket), as a ratio to `node -e 0` measured in the same rounds, so that a busy
 * machine slows both alike. Each round runs every case once, one after the other; another build's
 * `bin/svc.js` (--cli-compare) runs in the same rounds. What it shows: docs/performance.md.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { PROJECT_ROOT, ServiceNode } from './service-node';
import { median, round } from './stats';

export const THIS_CLI = join(PROJECT_ROOT, 'bin', 'svc.js');

/** What each round runs with each build (`node -e 0` once per round). */
const CASES: Array<{ label: string; args: string[] }> = [
  { label: 'svc --help', args: ['--help'] },
  { label: 'svc keys list', args: ['keys', 'list'] },
  { label: 'svc settings show demo', args: ['settings', 'show', 'demo'] },
  { label: 'svc schedules list demo', args: ['schedules', 'list', 'demo'] },
];

export interface CliCase {
  label: string;
  build: string;
  ms: number[];
  medianMs: number;
  /** medianMs / the median of `node -e 0`. */
  ratio: number;
}

export interface CliBenchRun {
  rounds: number;
  nodeMedianMs: number;
  nodeMs: number[];
  cases: CliCase[];
}

/** Runs `node <args>` to its exit; its wall time in ms, or an error with its output. */
async function timed(args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const started = process.hrtime.bigint();
  const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  if (code !== 0) {
    throw new Error(`node ${args.join(' ')} exited with ${code}:\n${output.slice(0, 2000)}`);
  }
  return ms;
}

export async function cliBench(options: {
  rounds: number;
  /** label → that build's bin/svc.js; this checkout's first. */
  builds: Array<{ build: string; cli: string }>;
  main: string;
  log: (line: string) => void;
  track: (node: ServiceNode) => void;
}): Promise<CliBenchRun> {
  const node = await ServiceNode.start({
    role: 'all',
    databaseUrl: '',
    scriptSlots: 1,
    main: options.main,
    // A first start on the embedded database creates it: on a busy machine, minutes.
    startTimeoutMs: 300_000,
  });
  options.track(node);
  try {
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      DATA_DIR: node.dataDirectory,
      LOG_LEVEL: 'warn',
    };
    const nodeMs: number[] = [];
    const samples = new Map<string, number[]>();
    // A first round unmeasured: the files into the page cache.
    for (let round = 0; round <= options.rounds; round += 1) {
      const nodeTime = await timed(['-e', '0'], env);
      if (round > 0) {
        nodeMs.push(nodeTime);
      }
      for (const { build, cli } of options.builds) {
        for (const { label, args } of CASES) {
          const ms = await timed([cli, ...args], env);
          if (round > 0) {
            const key = `${build}\t${label}`;
            samples.set(key, [...(samples.get(key) ?? []), ms]);
          }
        }
      }
      if (round > 0) {
        options.log(`round ${round}/${options.rounds} done`);
      }
    }
    const nodeMedianMs = median(nodeMs);
    const cases = [...samples].map(([key, ms]): CliCase => {
      const [build, label] = key.split('\t');
      const medianMs = median(ms);
      return { label, build, ms, medianMs, ratio: round(medianMs / nodeMedianMs, 2) };
    });
    return { rounds: options.rounds, nodeMedianMs, nodeMs, cases };
  } finally {
    await node.stop();
  }
}
