/**
 * Orders suites longest first, so that the last suites to start are short ones and no worker idles
 * while another finishes a long one. A suite's duration is the one the last run measured
 * (test-artifacts/suite-times.json, written by the suite-time reporter), else the one kept in
 * .ci/suite-times.json, else Jest's own record of earlier runs; a suite never timed goes first,
 * as Jest does with one it knows nothing of, ordered by its size.
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
        // Unknown suites first: a new one may be long. Within them, the bigger file first.
        const estimate = measured ?? 1e9 + statSync(test.path).size;
        return [test, estimate];
      }),
    );
    return [...tests].sort((a, b) => cost.get(b) - cost.get(a));
  }
}

module.exports = LongestFirstSequencer;
