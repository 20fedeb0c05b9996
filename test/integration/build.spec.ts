import { execFile } from 'node:child_process';
import { cp, mkdtemp, readFile, readdir, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

/**
 * `npm run build` (scripts/build.mjs, also run before `npm start` and `npm test`) builds dist/
 * only when its inputs changed: a second start of an unchanged checkout neither compiles nor
 * copies nor writes anything. Run on a copy of the checkout, so that the dist/ other tests
 * start is never rebuilt under them.
 */
const run = promisify(execFile);
const checkout = join(__dirname, '..', '..');
const parts = [
  'src',
  'migrations',
  'scripts',
  'tsconfig.json',
  'tsconfig.build.json',
  'package.json',
  'package-lock.json',
];

/** Path and modification time of every file under dist/. */
async function distFiles(root: string): Promise<Map<string, number>> {
  const dist = join(root, 'dist');
  const entries = await readdir(dist, { recursive: true, withFileTypes: true });
  const times = new Map<string, number>();
  for (const entry of entries.filter((e) => e.isFile())) {
    const path = join(entry.parentPath, entry.name);
    times.set(path.slice(dist.length + 1), (await stat(path)).mtimeMs);
  }
  return times;
}

describe('npm run build (scripts/build.mjs)', () => {
  let root: string;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'svc-build-'));
    for (const part of parts) {
      await cp(join(checkout, part), join(root, part), { recursive: true });
    }
    await symlink(join(checkout, 'node_modules'), join(root, 'node_modules'));
    await run(process.execPath, ['scripts/build.mjs'], { cwd: root });
  }, 300_000);

  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('builds the service and the files it reads beside it', async () => {
    const files = await distFiles(root);
    expect(files.has('src/main.js')).toBe(true);
    expect(files.has('src/r-engine/r/session.R')).toBe(true);
    expect(files.has('src/openapi/openapi.yaml')).toBe(true);
  });

  it('rewrites nothing in dist/ when nothing changed', async () => {
    const before = await distFiles(root);
    await run(process.execPath, ['scripts/build.mjs'], { cwd: root });
    expect(await distFiles(root)).toEqual(before);
  });

  it('builds again after a source changed, and then is quiet again', async () => {
    const yaml = join(root, 'src', 'openapi', 'openapi.yaml');
    await writeFile(yaml, `${await readFile(yaml, 'utf8')}# changed\n`);
    await run(process.execPath, ['scripts/build.mjs'], { cwd: root });
    expect(await readFile(join(root, 'dist', 'src', 'openapi', 'openapi.yaml'), 'utf8')).toMatch(
      /# changed\n$/,
    );
    const after = await distFiles(root);
    await run(process.execPath, ['scripts/build.mjs'], { cwd: root });
    expect(await distFiles(root)).toEqual(after);
  }, 300_000);

  it('builds again when dist/ was left half-built (no stamp)', async () => {
    await rm(join(root, 'dist', 'src', 'r-engine', 'r'), { recursive: true });
    await rm(join(root, 'dist', '.build-stamp'));
    await run(process.execPath, ['scripts/build.mjs'], { cwd: root });
    expect((await distFiles(root)).has('src/r-engine/r/session.R')).toBe(true);
  }, 300_000);
});
