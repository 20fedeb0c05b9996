/** Reads a V8 .cpuprofile (node --cpu-prof) and sums self time by package and by function. */
import { readFileSync } from 'node:fs';

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
