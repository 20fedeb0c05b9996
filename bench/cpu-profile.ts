/** Reads a V8 .cpuprofile (node --cpu-prof) and sums self time by package and by function. */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { table } from './report';
import { round } from './stats';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  startTime: number;
  endTime: number;
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileShare {
  name: string;
  ms: number;
  /** Share of the busy (non-idle) time, %. */
  percent: number;
}

export interface ProfileSummary {
  /** Whether only the samples in the requested window were counted (else the whole profile). */
  windowed: boolean;
  busyMs: number;
  idleMs: number;
  byPackage: ProfileShare[];
  /** Time with the package anywhere on the stack (typeorm includes the pg it calls). */
  byPackageInclusive: ProfileShare[];
  topFunctions: ProfileShare[];
  /** Our own functions with the time spent in them and everything they called. */
  svcInclusive: ProfileShare[];
}

/** Where a function lives: an npm package, a file of ours, Node itself, or V8's own work. */
function packageOf(url: string, functionName: string): string {
  if (url === '') {
    return functionName.startsWith('(') ? functionName : '(native)';
  }
  if (url.startsWith('node:')) {
    return 'node (core)';
  }
  const inModules = url.lastIndexOf('node_modules/');
  if (inModules >= 0) {
    const parts = url.slice(inModules + 'node_modules/'.length).split('/');
    return parts[0].startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0];
  }
  const ours = /\/dist\/(src\/[^/]+)/.exec(url);
  return ours ? `svc ${ours[1]}` : url;
}

function functionKey(frame: ProfileNode['callFrame']): string {
  const file = frame.url.replace(/^.*node_modules\//, '').replace(/^.*\/dist\//, '');
  return `${frame.functionName || '(anonymous)'} ${file}:${frame.lineNumber + 1}`;
}

function top(map: Map<string, number>, busyMs: number, count: number): ProfileShare[] {
  return [...map.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([name, ms]) => ({ name, ms, percent: (100 * ms) / busyMs }));
}

/**
 * Sums the samples taken between `fromUs` and `toUs`: V8 stamps samples with the monotonic clock
 * (microseconds), the clock `process.hrtime` reads in every process on the machine, so the load
 * generator can name its measurement window and start-up and warm-up stay out of the figures.
 */
export function summariseProfile(path: string, fromUs: number, toUs: number): ProfileSummary {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as CpuProfile;
  const windowed = fromUs >= profile.startTime && toUs <= profile.endTime;
  let at = profile.startTime;
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const parents = new Map<number, number>();
  for (const node of profile.nodes) {
    for (const child of node.children ?? []) {
      parents.set(child, node.id);
    }
  }
  const inclusive = new Map<string, number>();
  const packageInclusive = new Map<string, number>();
  const byPackage = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let idleMs = 0;
  let busyMs = 0;
  profile.samples.forEach((id, index) => {
    const deltaUs = profile.timeDeltas[index] ?? 0;
    at += deltaUs;
    if (windowed && (at < fromUs || at > toUs)) {
      return;
    }
    const ms = deltaUs / 1000;
    const frame = nodes.get(id)?.callFrame;
    if (!frame) {
      return;
    }
    if (frame.functionName === '(idle)') {
      idleMs += ms;
      return;
    }
    busyMs += ms;
    const pkg = packageOf(frame.url, frame.functionName);
    byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + ms);
    const fn = functionKey(frame);
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + ms);
    const onStack = new Set<string>();
    const packagesOnStack = new Set<string>();
    for (let node: number | undefined = id; node !== undefined; node = parents.get(node)) {
      const caller = nodes.get(node)?.callFrame;
      if (!caller || caller.functionName === '(root)') {
        continue;
      }
      packagesOnStack.add(packageOf(caller.url, caller.functionName));
      if (/\/dist\/src\//.test(caller.url)) {
        onStack.add(functionKey(caller));
      }
    }
    for (const key of onStack) {
      inclusive.set(key, (inclusive.get(key) ?? 0) + ms);
    }
    for (const key of packagesOnStack) {
      packageInclusive.set(key, (packageInclusive.get(key) ?? 0) + ms);
    }
  });
  return {
    windowed,
    busyMs,
    idleMs,
    byPackage: top(byPackage, busyMs, 15),
    byPackageInclusive: top(packageInclusive, busyMs, 40),
    topFunctions: top(byFunction, busyMs, 20),
    svcInclusive: top(inclusive, busyMs, 20),
  };
}

/**
 * A profile's summary as text: self time by package (share of the busy time and ms per unit of
 * work: an acknowledgement, a job), what sits anywhere on the stack, the hottest functions and
 * our own functions with what they call.
 */
export function printProfileSummary(
  summary: ProfileSummary,
  units: number,
  unit: string,
  log: (line: string) => void,
): void {
  const inclusive = new Map(summary.byPackageInclusive.map((share) => [share.name, share.percent]));
  log(
    table(
      ['package', 'self %', `self ms/${unit}`, 'inclusive %'],
      summary.byPackage.map((share) => [
        share.name,
        String(round(share.percent, 1)),
        String(round(share.ms / units, 3)),
        String(round(inclusive.get(share.name) ?? Number.NaN, 1)),
      ]),
    ),
  );
  log('\nInclusive (anywhere on the stack), % of busy time:');
  log(
    '  ' +
      summary.byPackageInclusive
        .filter((share) => share.percent < 99.5)
        .slice(0, 15)
        .map((share) => `${share.name} ${round(share.percent, 1)}`)
        .join(', '),
  );
  log('\nFunctions, self time (% of busy time):');
  for (const share of summary.topFunctions.slice(0, 12)) {
    log(`  ${round(share.percent, 1).toString().padStart(5)}  ${share.name}`);
  }
  log(`\nOur functions, inclusive time (% of busy time, ms/${unit}):`);
  for (const share of summary.svcInclusive.slice(0, 12)) {
    log(
      `  ${round(share.percent, 1).toString().padStart(5)}  ${round(share.ms / units, 3)
        .toString()
        .padStart(7)}  ${share.name}`,
    );
  }
}

/** Now, on the clock a V8 profile's timestamps use (microseconds). */
export function profileClockUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/**
 * The profile a node wrote into `dir` as it exited (--cpu-prof --cpu-prof-dir), counted over the
 * window of the work measured only, printed with `title` and per unit of that work.
 */
export function printProfileWindow(
  dir: string,
  windowUs: { from: number; to: number },
  work: { units: number; unit: string; title: string },
  log: (line: string) => void,
): void {
  const file = readdirSync(dir).find((name) => name.endsWith('.cpuprofile'));
  if (!file || windowUs.to === 0) {
    log(`No CPU profile of ${work.title}: the node wrote none, or the work did not run.`);
    return;
  }
  const summary = summariseProfile(join(dir, file), windowUs.from, windowUs.to);
  log(
    `\nCPU profile of the svc node's Node process (not its R processes) over ${work.title}` +
      `${summary.windowed ? '' : ' (the whole run: the window was not in the profile)'}: ` +
      `${round(summary.busyMs / work.units, 2)} ms busy per ${work.unit}`,
  );
  printProfileSummary(summary, work.units, work.unit, log);
}
