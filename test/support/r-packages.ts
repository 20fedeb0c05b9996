import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Builds a source package from a generated folder, with `R CMD build` (or, `tar: true`, with tar
 * alone, for hosts without native R): `greet()` answers `v<version>`; `extra` adds DESCRIPTION
 * lines, `code` replaces R/f.R.
 */
export function buildPackage(
  name: string,
  version: string,
  options: { extra?: string; code?: string; tar?: boolean } = {},
): Buffer {
  const dir = mkdtempSync(join(tmpdir(), 'svc-pkg-build-'));
  try {
    const source = join(dir, name);
    mkdirSync(join(source, 'R'), { recursive: true });
    writeFileSync(
      join(source, 'DESCRIPTION'),
      [
        `Package: ${name}`,
        `Version: ${version}`,
        'Title: A Package Built by the Test',
        'Description: Answers which version of it R loaded.',
        'License: GPL-2',
        'Author: svc tests',
        'Maintainer: svc tests <tests@example.com>',
        ...(options.extra ? [options.extra] : []),
        '',
      ].join('\n'),
    );
    writeFileSync(join(source, 'NAMESPACE'), 'export(greet)\n');
    writeFileSync(join(source, 'R', 'f.R'), options.code ?? `greet <- function() "v${version}"\n`);
    const [command, args] = options.tar
      ? ['tar', ['-czf', `${name}_${version}.tar.gz`, name]]
      : ['R', ['CMD', 'build', '--no-build-vignettes', '--no-manual', name]];
    execFileSync(command, args, { cwd: dir, stdio: 'ignore' });
    return readFileSync(join(dir, `${name}_${version}.tar.gz`));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
