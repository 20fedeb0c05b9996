/**
 * Runs before each spec file: puts the pass's backend in the spec's environment (jest.config.js
 * sets `globals.svcTestPass`; Jest gives every spec file a copy of process.env, so one pass's
 * settings never reach a spec of another pass on the same worker), and gives the worker back the
 * umask Jest started with, which is the process's own and not copied: a service an earlier file
 * started on this worker made it 0077, as it does in production.
 */
const { PASSES } = require('../passes');

const pass = PASSES[globalThis.svcTestPass];
if (pass) {
  for (const [name, value] of Object.entries(pass.env)) {
    if (value === undefined) {
      delete process.env[name];
    } else {
      process.env[name] = value;
    }
  }
}

if (process.env.SVC_TEST_UMASK !== undefined) {
  process.umask(Number(process.env.SVC_TEST_UMASK));
}
