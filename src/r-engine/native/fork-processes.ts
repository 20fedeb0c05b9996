import { readdir, readFile } from 'node:fs/promises';

/** The host's processes, read from /proc: what the fork server's runs and sweeps kill. */

interface ProcessEntry {
  pid: number;
  ppid: number;
  pgrp: number;
}

/** Every process on the machine with its parent and group (from /proc/<pid>/stat). */
export async function processTable(): Promise<ProcessEntry[]> {
  const entries: ProcessEntry[] = [];
  for (const name of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(name)) {
      continue;
    }
    const stat = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    // The command name may hold spaces and parentheses: the fields start after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields.length > 3) {
      entries.push({ pid: Number(name), ppid: Number(fields[1]), pgrp: Number(fields[2]) });
    }
  }
  return entries;
}

/**
 * The host pid of a process known by its pid in a PID namespace (`NSpid` in /proc/<pid>/status),
 * looked for below `root`; the pid itself when not sandboxed or not found.
 */
export async function hostPid(
  root: number,
  namespacePid: number,
  sandboxed: boolean,
): Promise<number> {
  if (!sandboxed || root === 0) {
    return namespacePid;
  }
  for (const pid of await processTree(root)) {
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    const nsPids = /^NSpid:\s*(.*)$/m.exec(status)?.[1].trim().split(/\s+/) ?? [];
    if (nsPids.length > 1 && Number(nsPids[nsPids.length - 1]) === namespacePid) {
      return pid;
    }
  }
  return namespacePid;
}

/** The pid and every process below it. */
async function processTree(pid: number): Promise<number[]> {
  const table = await processTable();
  const tree = [pid];
  for (let i = 0; i < tree.length; i += 1) {
    tree.push(...table.filter((p) => p.ppid === tree[i]).map((p) => p.pid));
  }
  return tree;
}

export function kill(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // ESRCH: already gone.
  }
}

/** Kills a child and what it started; the child first, so that it cannot start more. */
export async function killTree(pid: number): Promise<void> {
  const tree = await processTree(pid);
  tree.forEach(kill);
}
