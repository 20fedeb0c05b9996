import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataDirLock, DataDirOwnedError, OWNER_FILE } from './data-dir-owner';

describe('DataDirLock: one owner of DATA_DIR', () => {
  let dataDir: string;

  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'svc-owner-'));
  });
  afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

  const ownerFile = (): string => join(dataDir, OWNER_FILE);

  it('names its pid and socket, refuses a second owner in this process, and is free once released', () => {
    const lock = DataDirLock.acquire(dataDir);
    lock.serving('/tmp/svc-pg-x');
    expect(JSON.parse(readFileSync(ownerFile(), 'utf8'))).toEqual({
      pid: process.pid,
      socketDirectory: '/tmp/svc-pg-x',
    });
    expect(() => DataDirLock.acquire(dataDir)).toThrow(DataDirOwnedError);
    lock.release();
    expect(existsSync(ownerFile())).toBe(false);
    DataDirLock.acquire(dataDir).release();
  });

  it('refuses while another live process owns it, naming that process and its socket', () => {
    // The parent of this process is alive for as long as the test runs.
    writeFileSync(ownerFile(), JSON.stringify({ pid: process.ppid, socketDirectory: '/s' }));
    let refusal: unknown = null;
    try {
      DataDirLock.acquire(dataDir);
    } catch (error) {
      refusal = error;
    }
    expect(refusal).toBeInstanceOf(DataDirOwnedError);
    expect((refusal as DataDirOwnedError).owner).toEqual({
      pid: process.ppid,
      socketDirectory: '/s',
    });
    expect((refusal as Error).message).toBe(
      `DATA_DIR ${dataDir} is in use by svc process ${process.ppid}; stop it, or set DATA_DIR to another directory`,
    );
    expect(JSON.parse(readFileSync(ownerFile(), 'utf8')).pid).toBe(process.ppid);
  });

  it('takes over the file of a process that is gone (kill -9, a crash)', () => {
    const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
    writeFileSync(ownerFile(), JSON.stringify({ pid: Number(gone.stdout), socketDirectory: '/s' }));
    const lock = DataDirLock.acquire(dataDir);
    expect(JSON.parse(readFileSync(ownerFile(), 'utf8')).pid).toBe(process.pid);
    lock.release();
  });

  it('takes over its own pid left by a predecessor (a restarted container), and an unwritten file only after a grace', () => {
    writeFileSync(ownerFile(), JSON.stringify({ pid: process.pid, socketDirectory: null }));
    DataDirLock.acquire(dataDir).release();
    writeFileSync(ownerFile(), '');
    expect(() => DataDirLock.acquire(dataDir)).toThrow(DataDirOwnedError);
    // Left unwritten by a process that died between creating and writing it.
    const minuteAgo = new Date(Date.now() - 60_000);
    utimesSync(ownerFile(), minuteAgo, minuteAgo);
    DataDirLock.acquire(dataDir).release();
  });
});
