#!/usr/bin/env node
// Builds dist/ (`npm run build`, and before `npm start` and `npm test`), but only when its
// inputs changed since the last build: the TypeScript of src/ and migrations/, the static files
// copied beside it, the compiler settings and the installed dependencies (package-lock.json).
// A digest of their contents is kept in dist/.build-stamp; when it matches, nothing is compiled,
// copied or written, so a second start of an unchanged checkout starts at once. The stamp is
// removed before a build and written after a successful one: a failed or interrupted build
// builds again next time. `--force` (or removing dist/) builds regardless.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const stamp = join(root, 'dist', '.build-stamp');
const inputs = [
  'src',
  'migrations',
  'tsconfig.json',
  'tsconfig.build.json',
  'package-lock.json',
  'scripts/build.mjs',
];
/** Files the service reads beside its compiled code: [source, destination]. */
const copies = [
  ['src/r-engine/r', 'dist/src/r-engine/r'],
  ['src/upload/static', 'dist/src/upload/static'],
  ['src/console/static', 'dist/src/console/static'],
  ['src/openapi/static', 'dist/src/openapi/static'],
  ['src/openapi/openapi.yaml', 'dist/src/openapi/openapi.yaml'],
];

/** Every regular file of a path (a file or a directory), in a stable order. */
function files(path) {
  if (!existsSync(path)) {
    return [];
  }
  if (statSync(path).isFile()) {
    return [path];
  }
  return readdirSync(path, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name))
    .sort();
}

/** The digest of the build's inputs: each file's path and content. */
function inputDigest() {
  const hash = createHash('sha256');
  for (const file of inputs.flatMap((input) => files(join(root, input)))) {
    hash.update(relative(root, file)).update('\0').update(readFileSync(file)).update('\0');
  }
  return hash.digest('hex');
}

const digest = inputDigest();
const force = process.argv.includes('--force');
if (!force && existsSync(stamp) && readFileSync(stamp, 'utf8').trim() === digest) {
  process.exit(0);
}
rmSync(stamp, { force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const compiled = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], {
  cwd: root,
  stdio: 'inherit',
});
if (compiled.status !== 0) {
  process.exit(compiled.status ?? 1);
}
for (const [from, to] of copies) {
  cpSync(join(root, from), join(root, to), { recursive: true });
}
writeFileSync(stamp, `${digest}\n`);
