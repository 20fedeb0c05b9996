/**
 * CPU accounting from /proc (Linux): on a 2-core machine the service, PostgreSQL, R and the load
 * generator share the cores, so each run records who used how much of them.
 */
import { readFileSync } from 'node:fs';

/** Clock ticks per second of /proc times (`getconf CLK_TCK`; 100 on Linux for x86 and arm). */
const TICKS_PER_SECOND = 100;

export interface ProcessTimes {
  /** The process's own user + system CPU, ms. */
  selfMs: number;
  /** CPU of its waited-for descendants (for the service: the R processes), ms. */
  childrenMs: number;
}

/** Times of one process, or null when it has gone. */
export function processTimes(pid: number): ProcessTimes | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // The command name (field 2) may hold spaces; fields after it are space-separated from field 3.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const field = (n: number): number => Number(fields[n - 3]);
  const tick = 1000 / TICKS_PER_SECOND;
  return {
    selfMs: (field(14) + field(15)) * tick,
    childrenMs: (field(16) + field(17)) * tick,
  };
}

export interface MachineTimes {
  busyMs: number;
  totalMs: number;
}

/** Whole-machine CPU time (summed over cores) from the first line of /proc/stat. */
export function machineTimes(): MachineTimes {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
  const values = line.trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, idle, iowait, irq, softirq, steal] = values;
  const tick = 1000 / TICKS_PER_SECOND;
  const busy = user + nice + system + irq + softirq + steal;
  return { busyMs: busy * tick, totalMs: (busy + idle + iowait) * tick };
}

export function loadAverage(): number[] {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number);
}

/** Sum of the own CPU of several processes (PostgreSQL backends), keyed by pid. */
export function processesTimes(pids: readonly number[]): Map<number, number> {
  const times = new Map<number, number>();
  for (const pid of pids) {
    const t = processTimes(pid);
    if (t) {
      times.set(pid, t.selfMs);
    }
  }
  return times;
}

/** CPU used during one measured interval, ms, by each party. */
export interface CpuBreakdown {
  wallMs: number;
  /** Busy time of all cores; `wallMs * cores` is the most there is. */
  machineBusyMs: number;
  machineTotalMs: number;
  serviceMs: number;
  rMs: number;
  postgresBackendsMs: number;
  loadGeneratorMs: number;
  /** Everything else: PostgreSQL background processes, other users of the machine. */
  otherMs: number;
}

export interface CpuSnapshot {
  at: number;
  machine: MachineTimes;
  service: ProcessTimes;
  backends: Map<number, number>;
  self: NodeJS.CpuUsage;
}

export function cpuSnapshot(servicePid: number, backendPids: readonly number[]): CpuSnapshot {
  return {
    at: performance.now(),
    machine: machineTimes(),
    service: processTimes(servicePid) ?? { selfMs: 0, childrenMs: 0 },
    backends: processesTimes(backendPids),
    self: process.cpuUsage(),
  };
}

/**
 * The CPU used between two snapshots. Backends that started in between count from zero; one that
 * ended in between is lost (the pool keeps its connections open under load, so this is rare).
 */
export function cpuBetween(before: CpuSnapshot, after: CpuSnapshot): CpuBreakdown {
  let postgresBackendsMs = 0;
  for (const [pid, ms] of after.backends) {
    postgresBackendsMs += ms - (before.backends.get(pid) ?? 0);
  }
  const breakdown = {
    wallMs: after.at - before.at,
    machineBusyMs: after.machine.busyMs - before.machine.busyMs,
    machineTotalMs: after.machine.totalMs - before.machine.totalMs,
    serviceMs: after.service.selfMs - before.service.selfMs,
    rMs: after.service.childrenMs - before.service.childrenMs,
    postgresBackendsMs,
    loadGeneratorMs:
      (after.self.user - before.self.user + after.self.system - before.self.system) / 1000,
  };
  return {
    ...breakdown,
    otherMs: Math.max(
      0,
      breakdown.machineBusyMs -
        breakdown.serviceMs -
        breakdown.rMs -
        breakdown.postgresBackendsMs -
        breakdown.loadGeneratorMs,
    ),
  };
}
