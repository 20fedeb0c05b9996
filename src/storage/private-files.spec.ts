/**
 * DATA_DIR made private: secureDataDir refuses a directory others may write and closes one they
 * may read; makeTreePrivate closes what is below it without following links out of it.
 */
import {
  chmodSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataDirUnsafeError, makeTreePrivate, secureDataDir } from './private-files';

describe('private files', () => {
  let root: string;

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'svc-private-'));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('makes a missing DATA_DIR 0700, closes one others may read, refuses one they may write', () => {
    const dataDir = join(root, 'a', 'data');
    secureDataDir(dataDir);
    expect(statSync(dataDir).mode & 0o777).toBe(0o700);
    chmodSync(dataDir, 0o755);
    secureDataDir(dataDir);
    expect(statSync(dataDir).mode & 0o777).toBe(0o700);
    chmodSync(dataDir, 0o730);
    expect(() => secureDataDir(dataDir)).toThrow(
      new DataDirUnsafeError(
        `DATA_DIR ${dataDir} may be written by its group (mode 0730): they could replace its ` +
          `database and its lock; run \`chmod 700 ${dataDir}\` (or set DATA_DIR to a directory ` +
          "of this user's alone)",
      ),
    );
    expect(statSync(dataDir).mode & 0o777).toBe(0o730);
  });

  it('closes every file and directory below, but not what a link points to', () => {
    const outside = join(root, 'outside');
    writeFileSync(outside, 'x', { mode: 0o644 });
    chmodSync(outside, 0o666);
    const dataDir = join(root, 'data');
    mkdirSync(join(dataDir, 'pgdata', 'base'), { recursive: true });
    chmodSync(join(dataDir, 'pgdata'), 0o777);
    writeFileSync(join(dataDir, 'pgdata', 'base', '1259'), 'rows');
    chmodSync(join(dataDir, 'pgdata', 'base', '1259'), 0o666);
    symlinkSync(outside, join(dataDir, 'pgdata', 'link'));

    expect(makeTreePrivate(dataDir)).toBeGreaterThanOrEqual(2);
    expect(lstatSync(join(dataDir, 'pgdata')).mode & 0o777).toBe(0o700);
    expect(lstatSync(join(dataDir, 'pgdata', 'base', '1259')).mode & 0o777).toBe(0o600);
    expect(lstatSync(outside).mode & 0o777).toBe(0o666);
    expect(makeTreePrivate(dataDir)).toBe(0);
  });
});
