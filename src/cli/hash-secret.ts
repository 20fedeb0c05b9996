import { randomBytes } from 'node:crypto';
import { runCommand } from './run-command';
import { hashSecret, randomSecret } from '../security/secret-hash';

const USAGE = `usage:
  npm run hash-secret                 read a password from stdin (not echoed on a terminal),
                                      print its hash for USERS.<name>.passwordHash
  npm run hash-secret -- --api-key <principal> [--roles a,b] [--id <keyId>]
                                      make a new API key: print the key (for the client) and
                                      its API_KEYS entry (for the configuration)
Secrets are never taken as arguments: they would stay in the shell history.`;

/** Reads a secret: from a terminal without echo, else the whole of stdin minus one line end. */
async function readSecret(): Promise<string> {
  const stdin = process.stdin;
  if (!stdin.isTTY) {
    const chunks: Buffer[] = [];
    for await (const chunk of stdin) {
      chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks)
      .toString('utf8')
      .replace(/\r?\n$/, '');
  }
  process.stderr.write('Secret (not echoed): ');
  stdin.setRawMode(true);
  stdin.resume();
  let secret = '';
  try {
    for await (const chunk of stdin) {
      for (const char of (chunk as Buffer).toString('utf8')) {
        if (char === '\r' || char === '\n') {
          return secret;
        }
        if (char === '\u0003') {
          throw new Error('interrupted');
        }
        secret = char === '\u007f' ? secret.slice(0, -1) : secret + char;
      }
    }
    return secret;
  } finally {
    stdin.setRawMode(false);
    stdin.pause();
    process.stderr.write('\n');
  }
}

function option(argv: string[], name: string): string | undefined {
  const index = argv.indexOf(name);
  return index >= 0 ? argv[index + 1] : undefined;
}

async function main(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(USAGE);
    return 0;
  }
  const principal = option(argv, '--api-key');
  if (argv.includes('--api-key')) {
    if (!principal || !/^[^\s:]{1,128}$/.test(principal)) {
      console.error(`hash-secret: --api-key needs a principal name (no spaces or ":")\n${USAGE}`);
      return 2;
    }
    const id = option(argv, '--id') ?? `k${randomBytes(6).toString('hex')}`;
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(id)) {
      console.error('hash-secret: --id must be letters, digits, _ and - (at most 64)');
      return 2;
    }
    const roles = (option(argv, '--roles') ?? '').split(',').filter((role) => role !== '');
    const secret = randomSecret();
    const entry = { principal, roles, keyHash: await hashSecret(secret) };
    console.error('API key for the client (shown once; only its hash is kept):');
    console.log(`${id}.${secret}`);
    console.error('Entry to add to API_KEYS:');
    console.log(JSON.stringify({ [id]: entry }));
    return 0;
  }
  if (argv.length > 0) {
    console.error(`hash-secret: unexpected arguments\n${USAGE}`);
    return 2;
  }
  const secret = await readSecret();
  if (secret === '') {
    console.error('hash-secret: the secret is empty');
    return 2;
  }
  console.log(await hashSecret(secret));
  return 0;
}

runCommand('hash-secret', main);
