import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bwrapFailure, BWRAP_MISSING, closedToOthers } from './r-sandbox';

describe("bubblewrap's failed start, explained", () => {
  let root: string;
  let closed: string;
  let sources: string;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'svc-sandbox-problem-'));
    await chmod(root, 0o755);
    closed = join(root, 'home');
    sources = join(closed, 'svc', 'dist', 'src', 'r-engine', 'r');
    await mkdir(sources, { recursive: true, mode: 0o755 });
    await chmod(closed, 0o700);
  });

  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('names the directory that shuts the sandbox user out, and the chmod that opens it', () => {
    const output = `bwrap: Can't find source path ${sources}: Permission denied\n`;
    const problem = bwrapFailure(1, output, 65534);
    expect(problem.cause).toBe(
      `R did not run in bubblewrap (exit status 1: bwrap: Can't find source path ${sources}: Permission denied): bubblewrap works, but uid 65534, R's user in the sandbox cannot reach ${sources} (closed to other users: ${closed})`,
    );
    expect(problem.fix).toBe(
      `chmod o+x ${closed}, or move the checkout (or R) to a directory every user can reach, such as /opt or /srv`,
    );
    expect(`${problem.cause} ${problem.fix}`).not.toMatch(/install bubblewrap/);
  });

  it('lists every closed directory above the path, and the path itself when closed', async () => {
    const inner = join(closed, 'svc');
    await chmod(inner, 0o750);
    await chmod(sources, 0o700);
    try {
      expect(closedToOthers(sources)).toEqual([closed, inner, sources]);
      expect(
        bwrapFailure(1, `bwrap: Can't find source path ${sources}: Permission denied`, 65534).fix,
      ).toMatch(new RegExp(`^chmod o\\+x ${closed} ${inner} && chmod o\\+rx ${sources}, or move`));
    } finally {
      await chmod(inner, 0o755);
      await chmod(sources, 0o755);
    }
  });

  it('finds nothing closed on a path every user can reach', () => {
    expect(closedToOthers(tmpdir())).toEqual([]);
  });

  it('without a separate sandbox user, names the path and the access it needs', () => {
    const problem = bwrapFailure(
      1,
      `bwrap: Can't find source path ${sources}: Permission denied`,
      null,
    );
    expect(problem.cause).toMatch(new RegExp(`the service's user cannot reach ${sources}$`));
    expect(problem.fix).toMatch(
      new RegExp(`^give the service's user read and search access to ${sources} and every`),
    );
  });

  it('takes any other failure for namespaces bubblewrap may not make, quoting its last line', () => {
    const problem = bwrapFailure(
      1,
      'bwrap: Creating new namespace failed: Operation not permitted\n',
      65534,
    );
    expect(problem.cause).toBe(
      'R did not run in bubblewrap (exit status 1: bwrap: Creating new namespace failed: Operation not permitted)',
    );
    expect(problem.fix).toMatch(/^let bubblewrap make namespaces \(in Docker/);
  });

  it('tells to install bubblewrap only when it is missing', () => {
    expect(BWRAP_MISSING.cause).toMatch(/is not installed/);
    expect(BWRAP_MISSING.fix).toMatch(/^install bubblewrap \(Debian\/Ubuntu: apt-get install/);
  });
});
