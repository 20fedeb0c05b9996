/**
 * A job tree for the job-tree specs: `root` to fill, and `canary`, where its links point, which
 * the afterEach check proves untouched.
 */
import { execFileSync } from 'node:child_process';
import {
  closeSync,
  constants,
  linkSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Node has no mkfifo: the shell's. */
export function makeFifo(path: string): void {
  execFileSync('mkfifo', [path]);
}

/** A test that would hang on a FIFO fails fast instead. */
export const BLOCKING_TIMEOUT_MS = 10_000;

/** Every path below `dir` with its content (files) or '/' (directories), for before/after. */
export function snapshot(dir: string): Record<string, string> {
  const seen: Record<string, string> = {};
  const walk = (at: string, relative: string): void => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name);
      const name = relative ? `${relative}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        seen[name] = '/';
        walk(path, name);
      } else {
        seen[name] = readFileSync(path, 'utf8');
      }
    }
  };
  walk(dir, '');
  return seen;
}

/**
 * Makes `levels` nested directories named `name` below `root` and a file `leaf.txt` at the
 * bottom, through descriptors (a path that deep is beyond PATH_MAX for mkdir by path).
 */
export function makeDeepTree(root: string, levels: number, name: string): void {
  let fd = openSync(root, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    for (let i = 0; i < levels; i += 1) {
      mkdirSync(`/proc/self/fd/${fd}/${name}`);
      const next = openSync(
        `/proc/self/fd/${fd}/${name}`,
        constants.O_RDONLY | constants.O_DIRECTORY,
      );
      closeSync(fd);
      fd = next;
    }
    writeFileSync(`/proc/self/fd/${fd}/leaf.txt`, 'deep');
  } finally {
    closeSync(fd);
  }
}

export interface HostileTreeFixture {
  base: string;
  root: string;
  canary: string;
  /** Takes the canary's state again, after a test added to it on purpose. */
  resnapshotCanary(): void;
  /** A tree with a file, a nested file and every kind of entry that is not one. */
  plantHostileTree(): Promise<boolean>;
}

/** Registers the fixture's beforeEach and afterEach; its fields are fresh in every test. */
export function useHostileTree(): HostileTreeFixture {
  let canaryBefore: Record<string, string>;
  let servers: Server[];
  const fixture: HostileTreeFixture = {
    base: '',
    root: '',
    canary: '',
    resnapshotCanary: () => {
      canaryBefore = snapshot(fixture.canary);
    },
    plantHostileTree: () => plantHostileTree(),
  };

  beforeEach(async () => {
    const base = await mkdtemp(join(tmpdir(), 'svc-job-tree-'));
    const root = join(base, 'root');
    const canary = join(base, 'canary');
    Object.assign(fixture, { base, root, canary });
    mkdirSync(root);
    mkdirSync(join(canary, 'sub'), { recursive: true });
    writeFileSync(join(canary, 'secret.txt'), 'HOST-SECRET');
    writeFileSync(join(canary, 'sub', 'inner.txt'), 'HOST-INNER');
    canaryBefore = snapshot(canary);
    servers = [];
  });

  afterEach(async () => {
    await Promise.all(servers.map((server) => new Promise((done) => server.close(done))));
    // The canary is where the job tree's links point: nothing may have touched it.
    expect(snapshot(fixture.canary)).toEqual(canaryBefore);
    await rm(fixture.base, { recursive: true, force: true });
  });

  async function listenOn(path: string): Promise<void> {
    const server = createServer();
    servers.push(server);
    await new Promise<void>((done) => server.listen(path, done));
  }

  async function plantHostileTree(): Promise<boolean> {
    const { root, canary } = fixture;
    writeFileSync(join(root, 'result.txt'), 'result');
    writeFileSync(join(root, 'config.txt'), 'the service’s');
    writeFileSync(join(root, 'out.log'), 'R console');
    mkdirSync(join(root, 'plots', 'deeper'), { recursive: true });
    writeFileSync(join(root, 'plots', 'deeper', 'x.csv'), 'x\n1\n');
    symlinkSync(join(canary, 'secret.txt'), join(root, 'secret-link.txt'));
    symlinkSync(canary, join(root, 'canary-dir'));
    symlinkSync(join(canary, 'secret.txt'), join(root, 'plots', 'nested-link.txt'));
    symlinkSync(canary, join(root, 'plots', 'deeper', 'nested-dir'));
    symlinkSync('/proc/self/environ', join(root, 'environ'));
    makeFifo(join(root, 'fifo'));
    makeFifo(join(root, 'plots', 'fifo'));
    await listenOn(join(root, 'socket'));
    linkSync(join(root, 'result.txt'), join(root, 'plots', 'hard-link.txt'));
    try {
      execFileSync('mknod', [join(root, 'null-device'), 'c', '1', '3'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  }

  return fixture;
}
