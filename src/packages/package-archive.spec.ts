import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { ApiError } from '../common/api-error';
import { checkPackageName, readPackageDescription } from './package-archive';

/** A .tar.gz of `<dir>/DESCRIPTION` (and R/f.R) written by tar in the given format. */
function archive(dir: string, description: string, format: 'gnu' | 'pax' | 'ustar'): Buffer {
  const root = mkdtempSync(join(tmpdir(), 'svc-archive-spec-'));
  try {
    mkdirSync(join(root, dir, 'R'), { recursive: true });
    writeFileSync(join(root, dir, 'R', 'f.R'), 'f <- function() 1\n');
    writeFileSync(join(root, dir, 'DESCRIPTION'), description);
    execFileSync('tar', [`--format=${format}`, '-czf', 'p.tar.gz', dir], { cwd: root });
    return readFileSync(join(root, 'p.tar.gz'));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

function messageOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError);
    return (error as Error).message;
  }
  throw new Error('no error');
}

describe('readPackageDescription', () => {
  it.each(['gnu', 'pax', 'ustar'] as const)('reads Package and Version (%s tar)', (format) => {
    const text = 'Package: svc.demo\nTitle: A long\n  title\nVersion: 1.2-3\n';
    expect(readPackageDescription(archive('svc.demo', text, format))).toEqual({
      name: 'svc.demo',
      version: '1.2-3',
    });
  });

  it('finds DESCRIPTION behind a name longer than a tar header holds', () => {
    const name = `p${'x'.repeat(110)}`;
    for (const format of ['gnu', 'pax'] as const) {
      const text = `Package: ${name}\nVersion: 0.1\n`;
      expect(readPackageDescription(archive(name, text, format)).name).toBe(name);
    }
  });

  it('refuses what is not a source package, saying why', () => {
    expect(messageOf(() => readPackageDescription(Buffer.alloc(0)))).toMatch(/empty/);
    expect(messageOf(() => readPackageDescription(Buffer.from('PK\u0003\u0004')))).toMatch(
      /not gzip/,
    );
    expect(messageOf(() => readPackageDescription(Buffer.from([0x1f, 0x8b, 8, 0])))).toMatch(
      /not a readable/,
    );
    expect(messageOf(() => readPackageDescription(gzipSync(Buffer.alloc(1024))))).toMatch(
      /no <package>\/DESCRIPTION/,
    );
    expect(messageOf(() => readPackageDescription(archive('p1', 'Package: p1\n', 'gnu')))).toMatch(
      /Package and a Version/,
    );
    expect(
      messageOf(() => readPackageDescription(archive('p1', 'Package: p1\nVersion: one\n', 'gnu'))),
    ).toMatch(/not an R package version/);
    expect(
      messageOf(() => readPackageDescription(archive('p1', 'Package: 1p\nVersion: 1.0\n', 'gnu'))),
    ).toMatch(/not an R package name/);
  });
});

describe('checkPackageName', () => {
  it.each(['ab', 'data.table', 'R6', 'x2y.z'])('accepts %s', (name) => {
    expect(checkPackageName(name)).toBe(name);
  });
  it.each(['a', '1ab', 'ab.', 'a_b', 'a-b', '../x', 'a'.repeat(129)])('refuses %s', (name) => {
    expect(messageOf(() => checkPackageName(name))).toMatch(/not an R package name/);
  });
});
