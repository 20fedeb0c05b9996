/**
 * The embedded database's files and its lock, against another user of the machine (the tests run
 * as root, so "another user" is nobody, uid 65534, through setpriv; root reads everything, so
 * modes are asserted with lstat as well): everything the service writes under DATA_DIR is its
 * user's only whatever its umask, a DATA_DIR that others may write (or that is another user's) is
 * refused at start, an owner file another user cannot read is not stale and stays, and the
 * command line connects only to a socket, named by an owner file, that are both its user's.
 */
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { embeddedEnv, runSvc, ServiceProcess, spawnService } from '../support/service-process';
import { waitFor } from '../support/test-service';

const NOBODY = 65534;
const SVC = join(__dirname, '..', '..', 'bin', 'svc.js');
const ADMIN = `Basic ${Buffer.from('root:root-secret-1').toString('base64')}`;

/** Runs a program as nobody, without groups: the other user of the machine. */
function asNobody(command: string, args: string[], env: NodeJS.ProcessEnv = {}) {
  const ran = spawnSync(
    'setpriv',
    [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', command, ...args],
    { env: { PATH: process.env.PATH, ...env }, encoding: 'utf8', timeout: 60_000 },
  );
  return { code: ran.status, output: `${ran.stdout}${ran.stderr}` };
}

/** Every entry below `dir` (not following links), with its lstat. */
function entriesBelow(dir: string): Array<{ path: string; mode: number; uid: number }> {
  const found: Array<{ path: string; mode: number; uid: number }> = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    const stats = lstatSync(path);
    found.push({ path, mode: stats.mode & 0o7777, uid: stats.uid });
    if (entry.isDirectory()) {
      found.push(...entriesBelow(path));
    }
  }
  return found;
}

/** Entries that the group or other users may use in any way. */
const openToOthers = (dir: string) =>
  entriesBelow(dir)
    .filter((entry) => (entry.mode & 0o077) !== 0 || entry.uid !== process.getuid?.())
    .map((entry) => `${entry.path} 0${entry.mode.toString(8)} uid ${entry.uid}`);

/** Starts a service with the umask `umask` (a child inherits its parent's). */
async function spawnWithUmask(env: NodeJS.ProcessEnv, umask: number): Promise<ServiceProcess> {
  const previous = process.umask(umask);
  try {
    return await spawnService(env);
  } finally {
    process.umask(previous);
  }
}

async function stop(service: ServiceProcess | null): Promise<void> {
  if (service && service.child.exitCode === null && service.child.signalCode === null) {
    service.child.kill('SIGTERM');
    await service.exited();
  }
}

describe('DATA_DIR against another user of the machine', () => {
  let parent: string;
  let service: ServiceProcess | null = null;

  beforeEach(() => {
    // A parent that every user may pass, as /srv or a home directory often is.
    parent = mkdtempSync(join(tmpdir(), 'svc-data-dir-'));
    chmodSync(parent, 0o755);
  });
  afterEach(async () => {
    await stop(service);
    service = null;
    rmSync(parent, { recursive: true, force: true });
  });

  it('under umask 000, everything the service writes is its user only, and nobody cannot read the stored secret', async () => {
    const dataDir = join(parent, 'data');
    const env = embeddedEnv(dataDir);
    service = await spawnWithUmask(env, 0o000);
    const secret = `callback-secret-${Date.now()}-do-not-leak`;
    const stored = await fetch(`${service.url}/svc/api/rest/admin/applications/demo`, {
      method: 'PUT',
      headers: { Authorization: ADMIN, 'Content-Type': 'application/json', 'If-Match': '"0"' },
      body: JSON.stringify({ settings: { callbackSecret: secret } }),
    });
    expect(stored.status).toBe(200);
    // The secret reaches the write-ahead log (or a table) on disk: find the file that holds it.
    const holder = await waitFor(
      () =>
        Promise.resolve(
          entriesBelow(join(dataDir, 'pgdata')).find(
            (entry) => lstatSync(entry.path).isFile() && readFileSync(entry.path).includes(secret),
          )?.path,
        ),
      30_000,
      'the secret in a file of pgdata',
    );

    const read = asNobody('cat', [holder]);
    expect(read.output).not.toContain(secret);
    expect(read.code).not.toBe(0);
    expect(read.output).toContain('Permission denied');
    expect(asNobody('ls', [dataDir]).output).toContain('Permission denied');
    expect(lstatSync(dataDir).mode & 0o7777).toBe(0o700);
    expect(openToOthers(dataDir)).toEqual([]);
    // The socket the owner file names is the service's alone too.
    const { socketDirectory } = JSON.parse(readFileSync(join(dataDir, 'svc.owner'), 'utf8')) as {
      socketDirectory: string;
    };
    expect(lstatSync(socketDirectory).mode & 0o7777).toBe(0o700);

    // A data directory an older version left readable (0755, files 0666) is closed at start.
    await stop(service);
    chmodSync(dataDir, 0o755);
    for (const entry of entriesBelow(dataDir)) {
      chmodSync(entry.path, lstatSync(entry.path).isDirectory() ? 0o755 : 0o666);
    }
    service = await spawnWithUmask(env, 0o000);
    expect(lstatSync(dataDir).mode & 0o7777).toBe(0o700);
    expect(openToOthers(dataDir)).toEqual([]);
  });

  it('refuses to start on a DATA_DIR that its group or other users may write, or that is another user', async () => {
    const dataDir = join(parent, 'data');
    mkdirSync(dataDir, { mode: 0o700 });
    chmodSync(dataDir, 0o775);
    await expect(spawnService(embeddedEnv(dataDir))).rejects.toThrow(
      `DATA_DIR ${dataDir} may be written by its group (mode 0775): they could replace its ` +
        `database and its lock; run \`chmod 700 ${dataDir}\``,
    );
    chmodSync(dataDir, 0o777);
    const others = await runSvc(['keys', 'list'], embeddedEnv(dataDir));
    expect(others.code).toBe(1);
    expect(others.output).toContain(
      `DATA_DIR ${dataDir} may be written by other users (mode 0777)`,
    );
    chmodSync(dataDir, 0o700);
    chownSync(dataDir, NOBODY, NOBODY);
    const foreign = await runSvc(['keys', 'list'], embeddedEnv(dataDir));
    expect(foreign.code).toBe(1);
    expect(foreign.output).toContain(
      `DATA_DIR ${dataDir} belongs to uid ${NOBODY}, not to this process's user (uid 0): run svc as uid ${NOBODY}`,
    );
    expect(readdirSync(dataDir)).toEqual([]);
  });

  it("another user's command line neither removes the lock nor takes an unreadable one for stale; a second service is refused", async () => {
    const dataDir = join(parent, 'data');
    const env = embeddedEnv(dataDir);
    // The lock of a running owner (this test's process stands for it: a live pid of root's).
    mkdirSync(dataDir, { mode: 0o700 });
    const lock = join(dataDir, 'svc.owner');
    const held = JSON.stringify({ pid: process.pid, socketDirectory: null });
    writeFileSync(lock, held, { mode: 0o600 });
    // A service that has run for a while: its lock is older than any grace for a half-written one.
    const minuteAgo = new Date(Date.now() - 60_000);
    utimesSync(lock, minuteAgo, minuteAgo);
    // The operator lets a group (here: everyone) write DATA_DIR after the start.
    chmodSync(dataDir, 0o777);
    const listed = asNobody(process.execPath, [SVC, 'keys', 'list'], { DATA_DIR: dataDir });
    expect(listed.code).toBe(1);
    expect(listed.output).toContain(`DATA_DIR ${dataDir} may be written by other users`);
    expect(readFileSync(lock, 'utf8')).toBe(held);
    chmodSync(dataDir, 0o700);
    await expect(spawnService(env)).rejects.toThrow(
      `DATA_DIR ${dataDir} is in use by svc process ${process.pid}`,
    );

    // In a DATA_DIR of nobody's own, a lock nobody cannot read (another user's) is not stale.
    const theirs = join(parent, 'theirs');
    mkdirSync(theirs, { mode: 0o700 });
    chownSync(theirs, NOBODY, NOBODY);
    const foreignLock = join(theirs, 'svc.owner');
    writeFileSync(foreignLock, JSON.stringify({ pid: process.pid, socketDirectory: null }), {
      mode: 0o600,
    });
    utimesSync(foreignLock, minuteAgo, minuteAgo);
    const refused = asNobody(process.execPath, [SVC, 'keys', 'list'], { DATA_DIR: theirs });
    expect(refused.code).toBe(1);
    expect(refused.output).toContain(
      `the lock ${foreignLock} of DATA_DIR ${theirs} cannot be read (EACCES): it is not taken for stale`,
    );
    expect(existsSync(foreignLock)).toBe(true);
    expect(readdirSync(theirs)).toEqual(['svc.owner']);
  });

  describe('the command line trusts an owner file and its socket only when they are its user', () => {
    let server: Server;
    let connections: number;
    let socketDir: string;
    let dataDir: string;

    beforeEach(async () => {
      connections = 0;
      dataDir = join(parent, 'data');
      mkdirSync(dataDir, { mode: 0o700 });
      socketDir = join(parent, 'socket');
      mkdirSync(socketDir, { mode: 0o700 });
      // A database socket someone else put up: it must never be reached.
      server = createServer((socket) => {
        connections++;
        socket.destroy();
      });
      await new Promise<void>((resolve) =>
        server.listen(join(socketDir, '.s.PGSQL.5432'), resolve),
      );
      // The pid of a live process (this one), so that the lock is not stale.
      writeFileSync(
        join(dataDir, 'svc.owner'),
        JSON.stringify({ pid: process.pid, socketDirectory: socketDir }),
        { mode: 0o600 },
      );
    });
    afterEach(async () => {
      await new Promise((resolve) => server.close(resolve));
    });

    const keysList = () => runSvc(['keys', 'list'], embeddedEnv(dataDir));

    it('an owner file another user wrote', async () => {
      chownSync(join(dataDir, 'svc.owner'), NOBODY, NOBODY);
      const listed = await keysList();
      expect(listed.code).toBe(1);
      expect(listed.output).toContain(
        `the lock ${join(dataDir, 'svc.owner')} of DATA_DIR ${dataDir} is not a file of this user's (uid ${NOBODY}`,
      );
      expect(existsSync(join(dataDir, 'svc.owner'))).toBe(true);
      expect(connections).toBe(0);
    });

    it("a socket directory of another user's", async () => {
      chownSync(socketDir, NOBODY, NOBODY);
      const listed = await keysList();
      expect(listed.code).toBe(1);
      expect(listed.output).toContain(
        `names the database socket ${join(socketDir, '.s.PGSQL.5432')}, but its directory is not a private directory of this user's (uid ${NOBODY}`,
      );
      expect(connections).toBe(0);
    });

    it("a socket of another user's in a directory of its own", async () => {
      chownSync(join(socketDir, '.s.PGSQL.5432'), NOBODY, NOBODY);
      const listed = await keysList();
      expect(listed.code).toBe(1);
      expect(listed.output).toContain(`but it is not a socket of this user's (uid ${NOBODY}`);
      expect(connections).toBe(0);
    });

    it('a socket directory that others may enter', async () => {
      chmodSync(socketDir, 0o755);
      const listed = await keysList();
      expect(listed.code).toBe(1);
      expect(listed.output).toContain('its directory is not a private directory');
      expect(connections).toBe(0);
    });
  });
});
