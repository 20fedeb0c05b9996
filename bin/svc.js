#!/usr/bin/env node
// The svc command line (svc --help). It runs the built service: `npm run build` makes dist/.
'use strict';
const { existsSync } = require('node:fs');
const { join } = require('node:path');

const entry = join(__dirname, '..', 'dist', 'src', 'cli', 'svc.js');
if (!existsSync(entry)) {
  console.error('svc: the service is not built; run `npm run build` first');
  process.exit(1);
}
require(entry);
