import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/**
 * The checkout or image the service runs from (config/, package.json, wsdl/), from src/config in
 * the sources or dist/src/config in the build. Apart from app-config so that what needs only this
 * (`svc --version`) loads nothing else.
 */
export const PROJECT_ROOT_DIR = resolve(
  __dirname,
  '..',
  '..',
  existsSync(join(__dirname, '..', '..', 'config')) ? '' : '..',
);

/** The service's version, from package.json. */
export const SERVICE_VERSION = (
  JSON.parse(readFileSync(join(PROJECT_ROOT_DIR, 'package.json'), 'utf8')) as { version: string }
).version;
