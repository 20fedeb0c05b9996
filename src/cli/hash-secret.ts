import { randomBytes } from 'node:crypto';
import { CliCommand, parseCommandArgs, UsageError } from '../command-line/cli-command';
import { hashSecret, randomSecret } from '../common/secret-hash';

const USAGE = `usage:
  svc hash-secret                    read a password from stdin (not echoed on a terminal),
                                     print its hash for USERS.<name>.passwordHash
  svc hash-secret --api-key <principal> [--roles a,b] [--id <keyId>]
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

async function hashSecretCommandRun(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(argv, {
    'api-key': { type: 'string' },
    roles: { type: 'string' },
    id: { type: 'string' },
  });
  if (positionals.length > 0) {
    throw new UsageError('unexpected arguments');
  }
  const principal = values['api-key'];
  if (principal === undefined && (values.roles !== undefined || values.id !== undefined)) {
    throw new UsageError('--roles and --id go with --api-key');
  }
  if (principal !== undefined) {
    if (!/^[^\s:]{1,128}$/.test(principal)) {
      throw new UsageError('--api-key needs a principal name (no spaces or ":")');
    }
    const id = values.id ?? `k${randomBytes(6).toString('hex')}`;
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(id)) {
      throw new UsageError('--id must be letters, digits, _ and - (at most 64)');
    }
    const roles = (values.roles ?? '').split(',').filter((role) => role !== '');
    const secret = randomSecret();
    const entry = { principal, roles, keyHash: await hashSecret(secret) };
    console.error('API key for the client (shown once; only its hash is kept):');
    console.log(`${id}.${secret}`);
    console.error('Entry to add to API_KEYS:');
    console.log(JSON.stringify({ [id]: entry }));
    return 0;
  }
  const secret = await readSecret();
  if (secret === '') {
    throw new UsageError('the secret is empty');
  }
  console.log(await hashSecret(secret));
  return 0;
}

export const hashSecretCommand: CliCommand = {
  name: 'hash-secret',
  summary: 'hash a password, or make an API key, for the security settings',
  usage: USAGE,
  run: hashSecretCommandRun,
};
