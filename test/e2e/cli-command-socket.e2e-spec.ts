/**
 * The command line beside a running service on the embedded database: the service performs the
 * command (keys, settings, admin, schedules) through its command socket, so the command line loads
 * no database, framework or feature; the work is audited as `cli:<OS user>`; its messages are in
 * the command line's words and its exit statuses those its help lists. What crosses the socket is
 * hostile: an oversized, malformed, unknown or unfinished request is refused and the service goes
 * on; a socket or directory of another user's is never reached.
 */
import {
  chownSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { embeddedEnv, runSvc, ServiceProcess, spawnService } from '../support/service-process';
import { HTTP_WORDS, listedStatus, packagesOf, svcLoading } from '../support/svc-loading';

const NOBODY = 65534;
const ADMIN = `Basic ${Buffer.from('root:root-secret-1').toString('base64')}`;

/** Sends `data` to the socket at `path` as a client may (ending its side), and reads the answer. */
function sendRaw(path: string, data: string | Buffer, end = true): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(path);
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    // The service may answer and close before it has read all of an oversized request.
    socket.on('error', (error: NodeJS.ErrnoException) =>
      error.code === 'EPIPE' || error.code === 'ECONNRESET' ? undefined : reject(error),
    );
    socket.on('close', () => resolve(answer));
    if (end) {
      socket.end(data);
    } else {
      socket.write(data);
    }
  });
}

describe('the command line through a running service’s command socket', () => {
  let parent: string;
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let service: ServiceProcess;
  let help: string;

  const commandSocket = (): string =>
    join(
      (JSON.parse(readFileSync(join(dataDir, 'svc.owner'), 'utf8')) as { socketDirectory: string })
        .socketDirectory,
      'svc.command',
    );
  const auditOf = async (action: string): Promise<Array<Record<string, unknown>>> => {
    const answer = await fetch(`${service.url}/svc/api/rest/admin/audit?action=${action}`, {
      headers: { Authorization: ADMIN, Accept: 'application/json' },
    });
    expect(answer.status).toBe(200);
    return ((await answer.json()) as { auditEvents: Array<Record<string, unknown>> }).auditEvents;
  };

  beforeAll(async () => {
    parent = mkdtempSync(join(tmpdir(), 'svc-command-socket-'));
    dataDir = join(parent, 'data');
    env = embeddedEnv(dataDir);
    service = await spawnService(env);
    help = (await runSvc(['--help'], env)).stdout;
  });
  afterAll(async () => {
    service.child.kill('SIGTERM');
    await service.exited();
    rmSync(parent, { recursive: true, force: true });
  });

  it('a command beside the service loads only Node and the command line, and is performed and audited by the service', async () => {
    const created = await svcLoading(['keys', 'create', 'robot', '--roles', 'ops'], env);
    expect(created.code).toBe(0);
    const id = created.stdout.trim().split('.')[0];
    expect(created.output).toContain(`created API key ${id} for robot`);
    for (const args of [
      ['keys', 'list'],
      ['settings', 'show', 'ledger'],
      ['schedules', 'list', 'ledger'],
    ]) {
      const answer = await svcLoading(args, env);
      expect({ args, code: answer.code }).toEqual({ args, code: 0 });
      expect({ args, packages: [...packagesOf(answer.loaded)] }).toEqual({
        args,
        packages: ['reflect-metadata'],
      });
      // Not one file of the services, the storage's database code or the configuration's checks.
      const features = answer.loaded.filter((file) =>
        /\/dist\/src\/(?:api-keys|applications|schedules|security|audit|catalog)\/|\/config\/app-config\.js$|\/storage\/database-options\.js$/.test(
          file,
        ),
      );
      expect({ args, features }).toEqual({ args, features: [] });
    }
    expect((await runSvc(['keys', 'list'], env)).stdout).toMatch(
      new RegExp(`^${id}\\trobot\\tops\\t`, 'm'),
    );

    const made = await runSvc(['admin', 'create', 'ops'], env);
    expect(made.code).toBe(0);
    const password = made.stdout.trim();
    const asOps = await fetch(`${service.url}/svc/api/rest/admin/audit`, {
      headers: {
        Authorization: `Basic ${Buffer.from(`ops:${password}`).toString('base64')}`,
        Accept: 'application/json',
      },
    });
    expect(asOps.status).toBe(200);
    expect((await runSvc(['keys', 'revoke', id], env)).output).toBe(`revoked ${id}\n`);

    const principal = `cli:${userInfo().username}`;
    expect(await auditOf('apiKey.created')).toEqual([expect.objectContaining({ principal })]);
    expect(await auditOf('admin.created')).toEqual([
      expect.objectContaining({ principal, authMethod: 'commandLine' }),
    ]);
    expect(await auditOf('apiKey.revoked')).toEqual([expect.objectContaining({ principal })]);
  });

  it("refusals come back in the command line's words, with the exit statuses its help lists", async () => {
    const folder = mkdtempSync(join(parent, 'settings-'));
    const file = join(folder, 'ledger.json');
    writeFileSync(file, JSON.stringify({ settings: { maxQueuedJobs: 7 } }));
    const set = await runSvc(['settings', 'set', 'ledger', file, '--expect-version', '0'], env);
    expect(set.code).toBe(0);
    const answers = {
      stale: await runSvc(['settings', 'set', 'ledger', file, '--expect-version', '0'], env),
      noSuchKey: await runSvc(['keys', 'revoke', 'k-nothing'], env),
      badExpiry: await runSvc(['keys', 'create', 'robot', '--expires', 'tomorrow'], env),
      configuredName: await runSvc(['admin', 'create', 'root'], env),
      badSchedule: await runSvc(['schedules', 'pause', 'ledger', 'not-a-uuid'], env),
    };
    const refused = listedStatus(help, 'refused');
    const wrong = listedStatus(help, 'wrong arguments');
    expect(Object.fromEntries(Object.entries(answers).map(([k, v]) => [k, v.code]))).toEqual({
      stale: refused,
      noSuchKey: refused,
      badExpiry: wrong,
      configuredName: wrong,
      badSchedule: refused,
    });
    expect(answers.stale.output).toBe(
      'svc settings: the settings of ledger changed since you read them (version 1 is in ' +
        'force, not 0); read them again with `svc settings show ledger` and retry\n',
    );
    // The option's name, not the admin API's field.
    expect(answers.badExpiry.output).toMatch(
      /^svc keys: --expires: must be a time in ISO 8601 with a zone/,
    );
    expect(answers.configuredName.output).toMatch(
      /^svc admin: "root" is ADMIN_USER; choose another name\nusage: svc admin create/,
    );
    for (const [name, answer] of Object.entries(answers)) {
      expect({ name, output: answer.output }).toEqual({
        name,
        output: expect.not.stringMatching(HTTP_WORDS),
      });
    }
  });

  it('refuses an oversized, malformed, unknown or unfinished request, and goes on serving', async () => {
    const path = commandSocket();
    // The service's user's alone, whatever the umask: a socket in a directory no one else enters.
    expect(lstatSync(path).mode & 0o777).toBe(0o600);
    expect(lstatSync(dirname(path)).mode & 0o777).toBe(0o700);
    const refusal = (message: string): Record<string, unknown> => ({
      stdout: '',
      stderr: '',
      refused: 'failed',
      message: `command socket: ${message}`,
    });
    const oversized = await sendRaw(path, Buffer.alloc(2 * 1024 * 1024, 'x'));
    expect(JSON.parse(oversized)).toEqual(refusal('a request is at most 1048576 bytes'));
    expect(JSON.parse(await sendRaw(path, 'not json\n'))).toEqual(
      refusal('the request is not JSON'),
    );
    const shapes = [
      { command: 'keys', args: ['list'], input: null, extra: true },
      { command: 'keys', args: 'list', input: null },
      { command: 'keys', args: Array(65).fill('list'), input: null },
    ];
    for (const shape of shapes) {
      expect(JSON.parse(await sendRaw(path, `${JSON.stringify(shape)}\n`))).toMatchObject({
        refused: 'failed',
        message: expect.stringMatching(/^command socket: the request is not \{/),
      });
    }
    // Only the commands that act on what the service holds: never a migration, never another.
    const migrate = { command: 'migrate', args: ['revert'], input: null };
    expect(JSON.parse(await sendRaw(path, `${JSON.stringify(migrate)}\n`))).toEqual(
      refusal('"migrate" is not a command it performs'),
    );
    // The arguments are parsed again: an option the command does not know is refused.
    const option = { command: 'keys', args: ['list', '--all'], input: null };
    expect(JSON.parse(await sendRaw(path, `${JSON.stringify(option)}\n`))).toMatchObject({
      refused: 'usage',
    });
    // A file is never read by the service: only the text the command line sent.
    const file = {
      command: 'settings',
      args: ['set', 'ledger', '/etc/passwd', '--expect-version', '1'],
      input: null,
    };
    expect(JSON.parse(await sendRaw(path, `${JSON.stringify(file)}\n`))).toEqual({
      stdout: '',
      stderr: '',
      refused: 'usage',
      message: '/etc/passwd: the command line sent no file',
    });
    // A request that never ends is answered after 5 s and its connection closed.
    const started = Date.now();
    const unfinished = await sendRaw(path, '{"command":"keys"', false);
    expect(JSON.parse(unfinished)).toEqual(refusal('no whole request within 5 s'));
    expect(Date.now() - started).toBeGreaterThanOrEqual(4_500);

    const listed = await runSvc(['keys', 'list'], env);
    expect(listed.code).toBe(0);
  });

  describe("a command socket that is another user's is never reached", () => {
    let fake: Server;
    let connections: number;
    let fakeData: string;
    let socketDir: string;

    beforeEach(async () => {
      connections = 0;
      fakeData = mkdtempSync(join(parent, 'fake-data-'));
      socketDir = mkdtempSync(join(parent, 'fake-socket-'));
      fake = createServer((socket) => {
        connections++;
        socket.destroy();
      });
      await new Promise<void>((resolve) => fake.listen(join(socketDir, 'svc.command'), resolve));
      mkdirSync(fakeData, { recursive: true, mode: 0o700 });
      // The pid of a live process (this one), so that the owner file is not stale.
      writeFileSync(
        join(fakeData, 'svc.owner'),
        JSON.stringify({ pid: process.pid, socketDirectory: socketDir }),
        { mode: 0o600 },
      );
    });
    afterEach(async () => {
      await new Promise((resolve) => fake.close(resolve));
    });

    it.each([
      [
        'a socket directory of another user',
        () => chownSync(socketDir, NOBODY, NOBODY),
        'its directory is not a private directory',
      ],
      [
        'a socket of another user',
        () => chownSync(join(socketDir, 'svc.command'), NOBODY, NOBODY),
        "it is not a socket of this user's",
      ],
    ])('%s', async (_, make, message) => {
      make();
      const listed = await runSvc(['keys', 'list'], { ...env, DATA_DIR: fakeData });
      expect(listed.code).toBe(listedStatus(help, 'refused'));
      expect(listed.output).toContain(
        `names the command socket ${join(socketDir, 'svc.command')}, but ${message}`,
      );
      expect(connections).toBe(0);
    });
  });
});
