/**
 * Unit specs sit beside the code; integration and end-to-end specs live under test/.
 *
 * Without SVC_TEST_PASSES, one run of every spec on the backend the environment names. With it
 * (comma-separated pass names of test/passes.js), one Jest project per pass, each with its own
 * backend and its own choice of specs, scheduled together on the same workers, longest first.
 */
const { specsOfPass } = require('./test/passes');

// The umask Jest was started with: each spec file starts with it (test/support/pass-environment.js),
// whatever a service started by an earlier file on the same worker left (the service makes it 0077).
process.env.SVC_TEST_UMASK ??= String(process.umask());

const transform = {
  '^.+\\.ts$': [
    '@swc/jest',
    {
      jsc: {
        parser: { syntax: 'typescript', decorators: true },
        transform: { legacyDecorator: true, decoratorMetadata: true },
        target: 'es2022',
      },
      module: { type: 'commonjs' },
    },
  ],
};

const specs = [
  '<rootDir>/src/**/*.spec.ts',
  '<rootDir>/test/**/*.spec.ts',
  '<rootDir>/test/**/*.e2e-spec.ts',
];

const passes = (process.env.SVC_TEST_PASSES ?? '')
  .split(',')
  .map((name) => name.trim())
  .filter(Boolean);

const project = (name) => ({
  ...(name ? { displayName: name } : {}),
  rootDir: __dirname,
  testEnvironment: 'node',
  transform,
  testMatch: name ? specsOfPass(name, __dirname) : specs,
  globals: name ? { svcTestPass: name } : {},
  setupFiles: ['<rootDir>/test/support/pass-environment.js'],
});

module.exports = {
  rootDir: '.',
  testTimeout: 120000,
  maxWorkers: 2,
  testSequencer: '<rootDir>/test/support/longest-first-sequencer.js',
  reporters: ['default', '<rootDir>/test/support/suite-time-reporter.js'],
  ...(passes.length > 0 ? { projects: passes.map(project) } : project(undefined)),
};
