#!/usr/bin/env node
// Prints where a CI run's time went and what it found, from the files the run left in
// test-artifacts/: ci-stages.tsv (install and checks, written by .ci/run) and one
// suite-times-<run>.json per Jest run (test/support/suite-time-reporter.js). Per pass: its tests
// passed, failed and skipped, its wall span (first suite's start to last suite's end: passes run
// side by side, so spans overlap), the sum of its suites' times (what it costs a worker) and its
// ten slowest suites. Ends with the one summary line of the whole run.
// Usage: node .ci/summary.js <run>:<Jest's exit code>... A run whose report is missing, or whose
// Jest failed without a failing test in its report, counts as one failure.
const { existsSync, readFileSync } = require('node:fs');

const runs = process.argv.slice(2);
let passed = 0;
let failed = 0;
let skipped = 0;

const minutes = (seconds) =>
  `${Math.floor(seconds / 60)}m${String(Math.round(seconds % 60)).padStart(2, '0')}s`;

if (existsSync('test-artifacts/ci-stages.tsv')) {
  console.log('stages:');
  for (const line of readFileSync('test-artifacts/ci-stages.tsv', 'utf8').trim().split('\n')) {
    const [stage, seconds, outcome] = line.split('\t');
    console.log(`  ${stage.padEnd(40)} ${minutes(Number(seconds)).padStart(7)}  ${outcome}`);
    if (outcome === 'failed') {
      failed += 1;
    } else if (outcome === 'passed') {
      passed += 1;
    }
  }
}

for (const [run, exitCode] of runs.map((arg) => arg.split(':'))) {
  const path = `test-artifacts/suite-times-${run}.json`;
  if (!existsSync(path)) {
    console.log(`${run}: no report (the run did not finish)`);
    failed += 1;
    continue;
  }
  const report = JSON.parse(readFileSync(path, 'utf8'));
  console.log(`${run}: ${minutes(report.seconds)} of wall time, Jest's exit code ${exitCode}`);
  if (exitCode !== '0' && !report.suites.some((suite) => suite.failed > 0)) {
    console.log(`  ${run}: Jest failed with no failing test in its report (see its output above)`);
    failed += 1;
  }
  const passes = [...new Set(report.suites.map((suite) => suite.pass))];
  for (const pass of passes) {
    const suites = report.suites.filter((suite) => suite.pass === pass);
    const sum = (field) => suites.reduce((total, suite) => total + suite[field], 0);
    const first = Math.min(...suites.map((suite) => Date.parse(suite.start)));
    const last = Math.max(...suites.map((suite) => Date.parse(suite.end)));
    console.log(
      `  ${pass}: ${sum('passed')} passed, ${sum('failed')} failed, ${sum('skipped')} skipped in ` +
        `${suites.length} suites; span ${minutes((last - first) / 1000)}, suites' time ${minutes(sum('seconds'))}`,
    );
    for (const suite of [...suites].sort((a, b) => b.seconds - a.seconds).slice(0, 10)) {
      console.log(`    ${suite.seconds.toFixed(1).padStart(7)} s  ${suite.path}`);
    }
    passed += sum('passed');
    failed += sum('failed');
    skipped += sum('skipped');
  }
}

console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
