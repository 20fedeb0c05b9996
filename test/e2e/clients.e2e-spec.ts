import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCommand } from '../support/run-command';
import { ServiceProcess, spawnExampleService } from '../support/service-process';

const ROOT = join(__dirname, '..', '..');
const EXAMPLES = join(ROOT, 'examples', 'clients');

/** What every example prints against a fresh service with the example catalog. */
const EXPECTED_OUTPUT = [
  'job accepted: application demo',
  'result: success=true type=zip',
  'result files: plot.pdf summary.txt',
  'summary.txt: mean y = 5.00',
  'listed in application results: yes',
  'deleted: 204, then 404',
  'combn(4, 2): 6 combinations, the first 1 2',
  'fail: 400 this function always fails',
  'sum2: 11 12 13',
];

/**
 * Debian's python3-requests is installed for /usr/bin/python3; a `python3` earlier on the PATH
 * (pyenv, a virtualenv) may not have it.
 */
const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

interface ClientExample {
  file: string;
  command: string;
  /** A command that succeeds when the interpreter and the HTTP library are installed. */
  probe: [string, string[]];
  install: string;
}

const CLIENTS: ClientExample[] = [
  {
    file: 'flow.R',
    command: 'Rscript',
    probe: ['Rscript', ['-e', 'library(httr)']],
    install: 'apt-get install r-cran-httr',
  },
  {
    file: 'flow.py',
    command: PYTHON,
    probe: [PYTHON, ['-c', 'import requests']],
    install: 'apt-get install python3-requests',
  },
  {
    file: 'flow.sh',
    command: 'bash',
    probe: ['bash', ['-c', 'command -v curl && command -v zip && command -v unzip']],
    install: 'apt-get install curl zip unzip',
  },
];

function installed(client: ClientExample): boolean {
  const [command, args] = client.probe;
  return spawnSync(command, args, { stdio: 'ignore' }).status === 0;
}

describe('the client examples of docs/clients.md', () => {
  it('docs/clients.md holds every example file exactly as it is', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'clients.md'), 'utf8');
    for (const client of CLIENTS) {
      const source = readFileSync(join(EXAMPLES, client.file), 'utf8');
      expect({ file: client.file, inDoc: doc.includes(source) }).toEqual({
        file: client.file,
        inDoc: true,
      });
    }
  });

  describe('run against the built service', () => {
    let example: Awaited<ReturnType<typeof spawnExampleService>>;
    let service: ServiceProcess;

    beforeAll(async () => {
      example = await spawnExampleService();
      service = example.service;
    }, 180000);

    afterAll(async () => {
      await example?.stop();
    });

    for (const client of CLIENTS) {
      const available = installed(client);
      // Locally a missing interpreter or library skips its example; in CI it is a failure.
      const test = available || process.env.CI ? it : it.skip;
      test(`${client.command} ${client.file} runs the whole flow`, async () => {
        if (!available) {
          throw new Error(`${client.file} needs ${client.probe[0]}: ${client.install}`);
        }
        const { code, stdout, stderr } = await runCommand(
          client.command,
          [join(EXAMPLES, client.file)],
          {
            env: { ...process.env, SVC_URL: service.url },
          },
        );
        expect({ code, stderr: code === 0 ? '' : stderr }).toEqual({ code: 0, stderr: '' });
        expect(stdout.trimEnd().split('\n')).toEqual(EXPECTED_OUTPUT);
      }, 240000);
    }
  });
});
