/**
 * Writes, when a Jest run ends, what each suite cost: its pass, path, wall time, start and end,
 * and its tests passed, failed and skipped, to test-artifacts/suite-times-<run>.json (the run is
 * SVC_TEST_RUN, else "local"); and each suite's duration to test-artifacts/suite-times.json, which
 * the longest-first sequencer reads to order the next run. .ci/run prints the slowest suites and
 * the totals of each pass from these files.
 */
const { mkdirSync, readFileSync, writeFileSync, existsSync } = require('node:fs');
const { join } = require('node:path');
const { suiteKey } = require('./suite-key');

class SuiteTimeReporter {
  constructor(globalConfig) {
    this.rootDir = globalConfig.rootDir;
    this.suites = [];
    this.started = Date.now();
  }

  onTestResult(test, result) {
    const config = test.context.config;
    const key = suiteKey(config, test.path);
    const [pass, path] = [key.slice(0, key.indexOf(' ')), key.slice(key.indexOf(' ') + 1)];
    const { start, end } = result.perfStats;
    this.suites.push({
      pass,
      path,
      seconds: Math.max(0, end - start) / 1000,
      start: new Date(start || Date.now()).toISOString(),
      end: new Date(end || Date.now()).toISOString(),
      passed: result.numPassingTests,
      failed: result.numFailingTests + (result.testExecError ? 1 : 0),
      skipped: result.numPendingTests + result.numTodoTests,
    });
  }

  onRunComplete() {
    const dir = join(this.rootDir, 'test-artifacts');
    mkdirSync(dir, { recursive: true });
    const run = process.env.SVC_TEST_RUN || 'local';
    const report = {
      run,
      started: new Date(this.started).toISOString(),
      ended: new Date().toISOString(),
      seconds: (Date.now() - this.started) / 1000,
      suites: this.suites,
    };
    writeFileSync(join(dir, `suite-times-${run}.json`), `${JSON.stringify(report, null, 1)}\n`);
    const timesPath = join(dir, 'suite-times.json');
    let durations = {};
    if (existsSync(timesPath)) {
      try {
        durations = JSON.parse(readFileSync(timesPath, 'utf8')).durations ?? {};
      } catch {
        durations = {};
      }
    }
    for (const suite of this.suites) {
      durations[`${suite.pass} ${suite.path}`] = Math.round(suite.seconds * 1000);
    }
    writeFileSync(timesPath, `${JSON.stringify({ durations }, null, 1)}\n`);
  }
}

module.exports = SuiteTimeReporter;
