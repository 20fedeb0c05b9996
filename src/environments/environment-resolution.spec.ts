import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ApiError } from '../common/api-error';
import { contentsDigest, resolveLockfile, type AllowedSources } from './environment-resolution';
import { PackageRepositoryReader, readPackagesIndex } from './package-repositories';
import { parseLockfile } from './renv-lockfile';

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/** A CRAN-like directory: `PACKAGES` lists the current versions, earlier ones under Archive. */
function repository(
  root: string,
  name: string,
  current: Record<string, string>,
  archived: Record<string, string[]> = {},
): string {
  const contrib = join(root, name, 'src', 'contrib');
  mkdirSync(contrib, { recursive: true });
  writeFileSync(
    join(contrib, 'PACKAGES'),
    Object.entries(current)
      .map(([pkg, version]) => `Package: ${pkg}\nVersion: ${version}\nDepends: R (>=\n    3.5)\n`)
      .join('\n'),
  );
  for (const [pkg, version] of Object.entries(current)) {
    writeFileSync(join(contrib, `${pkg}_${version}.tar.gz`), `${pkg} ${version} in ${name}`);
  }
  for (const [pkg, versions] of Object.entries(archived)) {
    mkdirSync(join(contrib, 'Archive', pkg), { recursive: true });
    for (const version of versions) {
      writeFileSync(
        join(contrib, 'Archive', pkg, `${pkg}_${version}.tar.gz`),
        `${pkg} ${version} archived in ${name}`,
      );
    }
  }
  return pathToFileURL(join(root, name)).href;
}

function lock(
  packages: Record<string, { version: string; repository?: string; requirements?: string[] }>,
  repositories: Array<{ Name: string; URL: string }> = [],
): ReturnType<typeof parseLockfile> {
  return parseLockfile(
    Buffer.from(
      JSON.stringify({
        R: { Version: '4.3.2', Repositories: repositories },
        Packages: Object.fromEntries(
          Object.entries(packages).map(([name, p]) => [
            name,
            {
              Package: name,
              Version: p.version,
              Source: 'Repository',
              ...(p.repository ? { Repository: p.repository } : {}),
              Requirements: p.requirements ?? [],
            },
          ]),
        ),
      }),
    ),
  );
}

async function refusal(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).getStatus()).toBe(400);
    return (error as ApiError).message;
  }
  throw new Error('resolved');
}

describe('resolveLockfile', () => {
  let root: string;
  let main: string;
  let extra: string;
  const reader = new PackageRepositoryReader();

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'svc-resolution-'));
    main = repository(root, 'main', { alpha: '2.0', beta: '1.1' }, { alpha: ['1.0'] });
    extra = repository(root, 'extra', { gamma: '0.3' });
    // A link to a system file where a source package should be: never read.
    symlinkSync('/etc/passwd', join(root, 'extra', 'src', 'contrib', 'delta_1.0.tar.gz'));
    writeFileSync(
      join(root, 'extra', 'src', 'contrib', 'PACKAGES'),
      'Package: gamma\nVersion: 0.3\n\nPackage: delta\nVersion: 1.0\n',
    );
  });

  afterAll(() => rmSync(root, { recursive: true, force: true }));

  const allowed = (uploads: AllowedSources['uploads'] = []): AllowedSources => ({
    repositories: [main, extra],
    uploads,
  });

  it('takes current versions, earlier ones from Archive, and uploads first', async () => {
    const resolved = await resolveLockfile(
      lock({
        alpha: { version: '1.0' },
        beta: { version: '1.1', requirements: ['alpha'] },
        gamma: { version: '0.3' },
        mine: { version: '0.1' },
      }),
      allowed([{ name: 'mine', version: '0.1', sha256: 'f'.repeat(64) }]),
      reader,
    );
    expect(resolved).toEqual([
      {
        name: 'alpha',
        version: '1.0',
        origin: 'archive',
        repository: main,
        sourceSha256: sha256('alpha 1.0 archived in main'),
        requirements: [],
      },
      {
        name: 'beta',
        version: '1.1',
        origin: 'repository',
        repository: main,
        sourceSha256: sha256('beta 1.1 in main'),
        requirements: ['alpha'],
      },
      {
        name: 'gamma',
        version: '0.3',
        origin: 'repository',
        repository: extra,
        sourceSha256: sha256('gamma 0.3 in extra'),
        requirements: [],
      },
      {
        name: 'mine',
        version: '0.1',
        origin: 'upload',
        repository: null,
        sourceSha256: 'f'.repeat(64),
        requirements: [],
      },
    ]);
    expect(contentsDigest(resolved)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('looks only in the repository a package names, when the operator lists it', async () => {
    const message = await refusal(
      resolveLockfile(
        lock({ gamma: { version: '0.3', repository: 'Main' } }, [
          { Name: 'Main', URL: `${main}/` },
        ]),
        allowed(),
        reader,
      ),
    );
    expect(message).toMatch(/1 of 1 packages are in none of the sources .*: gamma 0\.3$/);
  });

  it('names every missing package at once', async () => {
    const message = await refusal(
      resolveLockfile(
        lock({ alpha: { version: '3.0' }, beta: { version: '1.1' }, zeta: { version: '1.0' } }),
        allowed(),
        reader,
      ),
    );
    expect(message).toMatch(/2 of 3 packages are in none of the sources/);
    expect(message).toMatch(/: alpha 3\.0, zeta 1\.0$/);
  });

  it('refuses a repository of the lockfile that the operator does not list, a file:// one too', async () => {
    for (const url of ['file:///etc', 'https://elsewhere.example.org', `${main}/../extra`]) {
      const message = await refusal(
        resolveLockfile(lock({}, [{ Name: 'Theirs', URL: url }]), allowed(), reader),
      );
      expect(message).toContain(
        `R.Repositories Theirs ("${url}") is not a repository this service takes packages from`,
      );
    }
  });

  it('does not follow a link where a source package should be', async () => {
    await expect(
      resolveLockfile(lock({ delta: { version: '1.0' } }), allowed(), reader),
    ).rejects.toMatchObject({ status: 503 });
  });

  it('says when no source is allowed at all', async () => {
    const message = await refusal(
      resolveLockfile(
        lock({ alpha: { version: '2.0' } }),
        { repositories: [], uploads: [] },
        reader,
      ),
    );
    expect(message).toContain(
      'none: R_REPOSITORIES is not set and the application has no uploaded packages',
    );
  });
});

describe('readPackagesIndex', () => {
  it('reads the current versions of DCF records, continuation lines and CRLF included', () => {
    const index = readPackagesIndex(
      'Package: a1\r\nVersion: 1.0\r\nImports: x,\r\n  y\r\n\r\nPackage: b2\nVersion: 2.0-1\n\n\nPackage: bad/\nVersion: 1.0\n',
      (name) => !name.includes('/'),
    );
    expect([...index]).toEqual([
      ['a1', '1.0'],
      ['b2', '2.0-1'],
    ]);
  });
});
