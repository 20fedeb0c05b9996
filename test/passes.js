/**
 * The test passes and the one rule that says which specs each runs.
 *
 * `npm test` runs every spec once, on the backend its environment names (DATABASE_URL set: that
 * PostgreSQL server, else the embedded PGlite; R_ENGINE picks the R engine). CI runs passes:
 *
 * - `server-native`: every spec, on the PostgreSQL server and native R.
 * - `embedded-webr`: what can differ on the embedded backend (PGlite and webR), chosen by where a
 *   spec lives (the storage, the queue, the R engine, the job log; every integration spec but
 *   those named `*.native.spec.ts`) or by what it declares: a line ` * @ci-pass embedded` in a
 *   docblock near its top. A spec joins by living there or by declaring it; no list of files is kept.
 * - `node24`: what can differ on another Node.js version (HTTP, streams, crypto, the build): every
 *   unit spec under `src/`, the build's spec, and the specs that declare `@ci-pass node24` (the
 *   HTTP edges and a smoke of the main job paths). The CI runs it with Node.js 24 itself.
 *
 * A pass is chosen with SVC_TEST_PASSES (comma-separated names); jest.config.js turns each into a
 * Jest project, so one Jest run schedules the suites of every pass on the same workers, longest
 * first (test/support/longest-first-sequencer.js), and no core waits for another pass to end.
 */
const { readdirSync, readFileSync } = require('node:fs');
const { join, relative, sep } = require('node:path');

const SERVER_URL = process.env.SVC_TEST_SERVER_URL || 'postgres://postgres@127.0.0.1:5432/postgres';

/** Where a spec lives, relative to the project, with forward slashes. */
function specPath(rootDir, file) {
  return relative(rootDir, file).split(sep).join('/');
}

/** The `@ci-pass` names a spec declares: lines ` * @ci-pass <name>` of a docblock near its top. */
function declaredPasses(file) {
  const head = readFileSync(file, 'utf8').slice(0, 8192);
  return new Set([...head.matchAll(/^\s*\*\s*@ci-pass\s+([a-z0-9-]+)/gm)].map((match) => match[1]));
}

const PASSES = {
  'server-native': {
    env: { DATABASE_URL: SERVER_URL, R_ENGINE: 'native' },
    runs: () => true,
  },
  'embedded-webr': {
    env: { DATABASE_URL: undefined, R_ENGINE: 'webr' },
    runs: (path, declared) =>
      declared.has('embedded') ||
      /^src\/(storage|queue|r-engine|job-log)\//.test(path) ||
      (/^test\/integration\//.test(path) && !/\.native\.spec\.ts$/.test(path)),
  },
  node24: {
    env: { DATABASE_URL: SERVER_URL, R_ENGINE: 'native' },
    runs: (path, declared) =>
      declared.has('node24') || /^src\//.test(path) || path === 'test/integration/build.spec.ts',
  },
};

const SPEC_NAME = /\.(spec|e2e-spec)\.ts$/;

function allSpecs(rootDir) {
  const found = [];
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        walk(path);
      } else if (entry.isFile() && SPEC_NAME.test(entry.name)) {
        found.push(path);
      }
    }
  };
  walk(join(rootDir, 'src'));
  walk(join(rootDir, 'test'));
  return found.sort();
}

/** The spec files a pass runs, as absolute paths. */
function specsOfPass(name, rootDir) {
  const pass = PASSES[name];
  if (!pass) {
    throw new Error(`unknown test pass "${name}" (known: ${Object.keys(PASSES).join(', ')})`);
  }
  return allSpecs(rootDir).filter((file) =>
    pass.runs(specPath(rootDir, file), declaredPasses(file)),
  );
}

module.exports = { PASSES, specsOfPass, specPath, declaredPasses };
