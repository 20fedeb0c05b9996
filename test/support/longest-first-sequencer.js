/**
 * Orders suites longest first, so that the last suites to start are short ones and no worker idles
 * while another finishes a long one. A suite's duration is the one the last run measured
 * (test-artifacts/suite-times.json, written by the suite-time reporter), else the one kept in
 * .ci/suite-times.json; a suite never timed goes first, as Jest does with one it knows nothing
 * of, ordered by an estimate: its size, weighed by its kind (an end-to-end spec starts services
 * and runs R, a unit spec mostly does neither).
 */
const { existsSync, readFileSync, statSync } = require('node:fs');
const { join } = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;
const { suiteKey } = require('./suite-key');

function readTimes(path) {
  if (!existsSync(path)) {
    return {};
  }
  try {
    return JSON.parse(readFileSync(path, 'utf8')).durations ?? {};
  } catch {
    return {};
  }
}

/** How much a byte of a spec costs, by its kind, for suites never timed. */
function kindWeight(path) {
  if (path.endsWith('.e2e-spec.ts')) {
    return 8;
  }
  return /[/\\]test[/\\]integration[/\\]/.test(path) ? 4 : 1;
}

class LongestFirstSequencer extends Sequencer {
  sort(tests) {
    const rootDir = tests[0]?.context.config.rootDir ?? process.cwd();
    const known = {
      ...readTimes(join(rootDir, '.ci', 'suite-times.json')),
      ...readTimes(join(rootDir, 'test-artifacts', 'suite-times.json')),
    };
    const cost = new Map(
      tests.map((test) => {
        const measured = known[suiteKey(test.context.config, test.path)];
        // Unknown suites first: a new one may be long. Within them, the costlier estimate first.
        const estimate = measured ?? 1e9 + statSync(test.path).size * kindWeight(test.path);
        return [test, estimate];
      }),
    );
    return [...tests].sort((a, b) => cost.get(b) - cost.get(a));
  }
}

module.exports = LongestFirstSequencer;
