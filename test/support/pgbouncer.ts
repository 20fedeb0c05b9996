import { ChildProcess, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './service-process';
import { sleep } from './test-service';

export const PGBOUNCER_PATH = process.env.PGBOUNCER_PATH ?? '/usr/sbin/pgbouncer';

export interface PgBouncer {
  /** `databaseUrl` with its host and port replaced by PgBouncer's. */
  url: string;
  /** Server connections PgBouncer keeps per database and user. */
  poolSize: number;
  output(): string;
  /** Stops PgBouncer at once (its server connections close) and removes its directory. */
  stop(): Promise<void>;
}

/**
 * Starts a real PgBouncer (Debian's `pgbouncer`) in transaction-pooling mode on a free loopback
 * port, in front of the server of `databaseUrl`, with trust authentication (loopback only). As
 * root it runs as `postgres` (PgBouncer refuses to run as root), so its directory is readable.
 */
export async function startPgBouncer(databaseUrl: string, poolSize = 4): Promise<PgBouncer> {
  const target = new URL(databaseUrl);
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'svc-pgbouncer-'));
  chmodSync(dir, 0o755);
  const user = decodeURIComponent(target.username || 'postgres');
  writeFileSync(join(dir, 'userlist.txt'), `"${user}" ""\n`);
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${target.hostname} port=${target.port || '5432'}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      'pool_mode = transaction',
      `default_pool_size = ${poolSize}`,
      'max_client_conn = 500',
      // Server connections may stay for the whole test; the test database is dropped after stop().
      'server_idle_timeout = 600',
      '',
    ].join('\n'),
  );
  // Readable by PgBouncer's user whatever the umask (a service started in this process sets 0077).
  chmodSync(join(dir, 'userlist.txt'), 0o644);
  chmodSync(join(dir, 'pgbouncer.ini'), 0o644);
  const args = [join(dir, 'pgbouncer.ini')];
  if (process.getuid?.() === 0) {
    args.unshift('-u', 'postgres');
  }
  const child: ChildProcess = spawn(PGBOUNCER_PATH, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let running = true;
  void exited.then(() => (running = false));
  const deadline = Date.now() + 10_000;
  while (!(await accepts(port))) {
    if (!running || Date.now() > deadline) {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`PgBouncer did not start:\n${output}`);
    }
    await sleep(50);
  }
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return {
    url: url.toString(),
    poolSize,
    output: () => output,
    stop: async () => {
      // SIGTERM: immediate shutdown (SIGINT would wait for every client to leave).
      if (running) {
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function pgBouncerInstalled(): boolean {
  return existsSync(PGBOUNCER_PATH);
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
