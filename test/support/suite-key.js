/** A suite's name in the timing files: its pass (the Jest project) and its path in the project. */
const { relative, sep } = require('node:path');

function suiteKey(config, path) {
  const pass = config.displayName?.name ?? config.displayName ?? 'default';
  return `${pass} ${relative(config.rootDir, path).split(sep).join('/')}`;
}

module.exports = { suiteKey };
