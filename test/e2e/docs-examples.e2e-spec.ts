import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCommand } from '../support/run-command';
import {
  runSvc,
  ServiceProcess,
  spawnExampleService,
  spawnService,
  stopServices,
} from '../support/service-process';
import { createTestDatabase, TestDatabase, testEnvironment } from '../support/test-service';

/**
 * The shell examples of README.md, docs/api.md and docs/functions.md, run as a newcomer pastes them, against the
 * built service. An example is a ```sh block with curl calls of the service at http://localhost:8888;
 * a line `<!-- not run: why -->` right above its fence leaves it out (it needs credentials, or
 * shows a placeholder). The blocks of the documents run in order, each in a fresh bash with
 * `set -euo pipefail`, all in one scratch directory (the files one block writes, the next
 * uses), with the base URL pointed at the test's service. Each must exit 0; no answer may be a
 * 5xx; a 4xx only where the block names that status; and every comment line that shows an
 * answer (`# {…}`, `# <…>`) must match what the commands printed (`…` stands for anything).
 * A `console` block is a transcript, not an example, and is not run.
 */
const ROOT = join(__dirname, '..', '..');
const DOCUMENTS = ['README.md', 'docs/api.md', 'docs/functions.md'];
const BASE = 'http://localhost:8888';
const STATUS = 'svc-docs-example-status';

interface Example {
  where: string;
  code: string;
  notRun: string | null;
}

/** The ```sh blocks of a document that call the service. */
function examples(document: string, text: string): Example[] {
  const lines = text.split('\n');
  const found: Example[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i] !== '```sh') {
      continue;
    }
    const end = lines.indexOf('```', i + 1);
    const code = lines.slice(i + 1, end).join('\n');
    const marker = /^<!-- not run: (.+) -->$/.exec(lines[i - 1] ?? '');
    if (/^curl /m.test(code) && code.includes(BASE)) {
      found.push({ where: `${document}:${i + 1}`, code, notRun: marker?.[1] ?? null });
    }
    i = end;
  }
  return found;
}

/** The answers a block shows in comments, as patterns (`…` matches anything). */
function shownAnswers(code: string, base: string): RegExp[] {
  return code
    .split('\n')
    .filter((line) => /^# [{<[]/.test(line))
    .map((line) => line.slice(2).trim().replaceAll(BASE, base))
    .map(
      (answer) =>
        new RegExp(
          answer
            .split('…')
            .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
            .join('.*?'),
        ),
    );
}

describe('the shell examples of README.md and docs/api.md', () => {
  const all: Example[] = [];

  beforeAll(async () => {
    for (const document of DOCUMENTS) {
      all.push(...examples(document, await readFile(join(ROOT, document), 'utf8')));
    }
  });

  it('call the service on its default port, 8888', async () => {
    for (const document of [...DOCUMENTS, 'docs/clients.md', 'docs/operations.md']) {
      const text = await readFile(join(ROOT, document), 'utf8');
      const ports = [...text.matchAll(/\/\/localhost:(\d+)\/svc\//g)].map((match) => match[1]);
      expect({ document, other: ports.filter((port) => port !== '8888') }).toEqual({
        document,
        other: [],
      });
    }
  });

  it('are found, and each left out says why', () => {
    expect(all.filter((example) => example.notRun === null).length).toBeGreaterThanOrEqual(6);
    for (const example of all.filter((e) => e.notRun !== null)) {
      expect(example.notRun).toMatch(/\w{3,}/);
    }
  });

  describe('run against the built service', () => {
    let example: Awaited<ReturnType<typeof spawnExampleService>>;
    let service: ServiceProcess;
    let scratch: string;

    beforeAll(async () => {
      example = await spawnExampleService();
      service = example.service;
      scratch = await mkdtemp(join(tmpdir(), 'svc-docs-examples-'));
    }, 180000);

    afterAll(async () => {
      await example?.stop();
      if (scratch) {
        await rm(scratch, { recursive: true, force: true });
      }
    });

    it('each exits 0, answers no 5xx and no 4xx it does not name, and prints what it shows', async () => {
      const outcomes: Array<Record<string, unknown>> = [];
      for (const example of all.filter((e) => e.notRun === null)) {
        const code = example.code.replaceAll(BASE, service.url);
        await writeFile(join(scratch, 'example.sh'), code);
        const {
          code: exit,
          stdout,
          stderr,
        } = await runCommand(
          'bash',
          [
            '-c',
            [
              'set -euo pipefail',
              `curl() { command curl --write-out '%{stderr}${STATUS} %{http_code}\\n' "$@"; }`,
              'source ./example.sh',
            ].join('\n'),
          ],
          { cwd: scratch },
        );
        const statuses = [...stderr.matchAll(new RegExp(`${STATUS} (\\d{3})`, 'g'))].map((match) =>
          Number(match[1]),
        );
        const unexpected = statuses.filter(
          (status) =>
            status < 200 || status >= 500 || (status >= 400 && !example.code.includes(`${status}`)),
        );
        const missing = shownAnswers(example.code, service.url)
          .filter((answer) => !answer.test(stdout))
          .map(String);
        outcomes.push({
          where: example.where,
          exit,
          answered: statuses.length > 0,
          unexpected,
          missing,
          ...(exit === 0 && statuses.length > 0 && unexpected.length === 0 && missing.length === 0
            ? {}
            : { stdout: stdout.slice(-2000), stderr: stderr.slice(-2000) }),
        });
      }
      expect(outcomes).toEqual(
        outcomes.map((outcome) => ({
          where: outcome.where,
          exit: 0,
          answered: true,
          unexpected: [],
          missing: [],
        })),
      );
    }, 600000);
  });
});

/** POST /process of the demo's combn(5, 2): its status and body. */
async function demoCall(service: ServiceProcess): Promise<string> {
  const answer = await fetch(`${service.url}/svc/api/rest/process`, {
    method: 'POST',
    headers: { 'X-SVC-Application-Name': 'demo', 'Content-Type': 'application/json' },
    body: '{"RFunction":"combn","n":5,"k":2}',
  });
  return `${answer.status} ${await answer.text()}`;
}

const DEMO = /^200 \{"n":5,"k":2,"combinations":\[\[1,2\]/;
const NO_DEMO = /^400 .*demo/;

describe("the example catalog at start-up, as the README's quick start says", () => {
  let database: TestDatabase;
  let own: string;

  beforeEach(async () => {
    database = await createTestDatabase();
    own = await mkdtemp(join(tmpdir(), 'svc-own-catalog-'));
    await mkdir(join(own, 'sales', 'R_SCRIPTS'), { recursive: true });
    await writeFile(join(own, 'sales', 'R_SCRIPTS', 'report.R'), 'writeLines("report")\n');
  });

  afterEach(async () => {
    await database.drop();
    await rm(own, { recursive: true, force: true });
  });

  it('a catalog loaded first is left as it is; --keep-existing adds the examples', async () => {
    const env = testEnvironment(database, { LOG_LEVEL: 'warn' });
    // On a server, as the README's server section goes: the migrations first.
    if (database.url) {
      expect((await runSvc(['migrate', 'run'], env)).code).toBe(0);
    }
    expect((await runSvc(['catalog', 'load', own], env)).code).toBe(0);
    let service = await spawnService(env, 120000);
    try {
      expect(await demoCall(service)).toMatch(NO_DEMO);
    } finally {
      await stopServices([service]);
    }
    const load = await runSvc(['catalog', 'load', '--keep-existing', join(ROOT, 'catalog')], env);
    expect(load.output).toContain('demo/R_FUNCTIONS/functions.R');
    service = await spawnService(env, 120000);
    try {
      expect(await demoCall(service)).toMatch(DEMO);
    } finally {
      await stopServices([service]);
    }
  }, 300000);

  it('an empty catalog gets the examples on an embedded database, not on a server', async () => {
    const service = await spawnService(testEnvironment(database, { LOG_LEVEL: 'warn' }), 120000);
    try {
      expect(await demoCall(service)).toMatch(database.url ? NO_DEMO : DEMO);
    } finally {
      await stopServices([service]);
    }
  }, 300000);
});
