/**
 * Preloaded (`node --import`) by the command line's tests: at its exit the process writes the
 * CommonJS files it loaded, as a JSON array, to the file SVC_TEST_LOADED_MODULES names.
 */
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const { cache } = createRequire(import.meta.url);

process.on('exit', () => {
  writeFileSync(process.env.SVC_TEST_LOADED_MODULES, JSON.stringify(Object.keys(cache)));
});
