/**
 * Runs before each spec of a pass (jest.config.js sets `globals.svcTestPass`): puts the pass's
 * backend in the spec's environment. Jest gives every spec file a copy of process.env, so one
 * pass's settings never reach a spec of another pass on the same worker.
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
