import { readdirSync, readFileSync } from 'node:fs';
import { ADMIN_AUTHORIZATION, ADMIN_ENV } from '../support/admin-auth';
import { makeZip } from '../support/zip-fixtures';
import { parseXml, postZip, request, waitForResult } from '../support/rest-client';
import { ServiceProcess, spawnService } from '../support/service-process';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  TestDatabase,
  testEnvironment,
} from '../support/test-service';

const describeWithServer = SERVER_DATABASE_URL ? describe : describe.skip;

/** Command lines of a process's descendants (read from /proc). */
function descendantCommandLines(root: number): string[] {
  const parents = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    try {
      // The parent pid is the field after the state, which follows the ")" closing the name.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // Not a process, or gone meanwhile.
    }
  }
  const isDescendant = (pid: number): boolean => {
    for (let parent = parents.get(pid); parent !== undefined; parent = parents.get(parent)) {
      if (parent === root) {
        return true;
      }
    }
    return false;
  };
  return [...parents.keys()].filter(isDescendant).map((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
    } catch {
      return '';
    }
  });
}

// Several nodes need a shared database server; the embedded database belongs to one process.
describeWithServer(
  'scale-out: two API nodes and two workers on one database (SPEC §2, §13)',
  () => {
    let database: TestDatabase;
    const nodes: ServiceProcess[] = [];

    beforeAll(async () => {
      database = await createTestDatabase();
      // Polling once a minute: only LISTEN/NOTIFY can start these jobs quickly.
      const env = testEnvironment(database, {
        POLL_INTERVAL_MS: '60000',
        SCRIPT_SLOTS: '2',
        ...ADMIN_ENV,
      });
      nodes.push(await spawnService({ ...env, ROLE: 'api' }));
      nodes.push(await spawnService({ ...env, ROLE: 'api', MIGRATIONS_RUN: 'false' }));
      nodes.push(await spawnService({ ...env, ROLE: 'worker', MIGRATIONS_RUN: 'false' }));
      nodes.push(await spawnService({ ...env, ROLE: 'worker', MIGRATIONS_RUN: 'false' }));
    });

    afterAll(async () => {
      for (const node of nodes) {
        node.child.kill('SIGTERM');
      }
      await Promise.all(nodes.map((node) => node.exited()));
      await database.drop();
    });

    it('runs jobs posted to either API node on the workers, woken by NOTIFY, one result each', async () => {
      const [apiA, apiB] = nodes;
      const zip = await makeZip([
        { name: 'pid.R', content: 'writeLines(as.character(Sys.getpid()), "pid.txt")\n' },
      ]);
      const started = Date.now();
      const tokens = await Promise.all(
        Array.from({ length: 8 }, async (_, i) => {
          const answer = await postZip((i % 2 === 0 ? apiA : apiB).url, zip);
          expect(answer.status).toBe(202);
          return parseXml(answer.text).jobToken;
        }),
      );
      for (const token of tokens) {
        const result = parseXml((await waitForResult(token.resultUri, {}, 30000)).text).result;
        expect(result.success).toBe('true');
      }
      // Far below the 60 s poll interval: the workers were woken by notifications.
      expect(Date.now() - started).toBeLessThan(30000);
      const listed = JSON.parse(
        (
          await request(`${apiB.url}/svc/api/rest/results/demo`, {
            headers: { Accept: 'application/vnd.svc+json' },
          })
        ).text,
      ) as { results: { result: Array<{ jobId: string }> } };
      expect(listed.results.result.map((r) => r.jobId).sort()).toEqual(
        tokens.map((t) => t.jobId).sort(),
      );
    });

    it('an API node starts no fork server (it runs no script jobs); workers do', () => {
      const forkServers = (node: ServiceProcess): number =>
        descendantCommandLines(node.child.pid as number).filter((line) =>
          line.includes('fork-server.R'),
        ).length;
      expect(forkServers(nodes[0])).toBe(0);
      expect(forkServers(nodes[1])).toBe(0);
      expect(forkServers(nodes[2])).toBeGreaterThan(0);
    });

    it('an API node answers /process calls on its own warm sessions', async () => {
      const application = { 'X-SVC-Application-Name': 'roles' };
      const put = await request(`${nodes[0].url}/svc/api/rest/admin/catalog/R_FUNCTIONS/f.R`, {
        method: 'PUT',
        headers: { ...application, Authorization: ADMIN_AUTHORIZATION },
        body: 'svcJsonService <- function(payload) paste0("{\\"echo\\":", payload, "}")\n',
      });
      expect(put.status).toBe(201);
      const answer = await request(`${nodes[0].url}/svc/api/rest/process`, {
        method: 'POST',
        headers: { ...application, 'Content-Type': 'application/json' },
        body: '{"a":2}',
      });
      expect({ status: answer.status, text: answer.text }).toEqual({
        status: 200,
        text: '{"echo":{"a":2}}',
      });
    });

    it('a worker has no HTTP server', async () => {
      const worker = nodes[2];
      await expect(fetch(`${worker.url}/svc/api/rest/results/demo`)).rejects.toThrow();
    });
  },
);

describe('graceful shutdown (SPEC §5.4)', () => {
  it('lets a running job finish on SIGTERM, then exits 0', async () => {
    const database = await createTestDatabase();
    const env = testEnvironment(database, { SHUTDOWN_GRACE_SECONDS: '30' });
    const first = await spawnService(env);
    const zip = await makeZip([
      { name: 'slow.R', content: 'Sys.sleep(2)\nwriteLines("done", "done.txt")\n' },
    ]);
    const token = parseXml((await postZip(first.url, zip)).text).jobToken;
    for (let i = 0; i < 100; i++) {
      const status = await request(`${first.url}/svc/api/rest/jobs/demo/${token.jobId}`);
      if (parseXml(status.text).jobStatus?.state === 'RUNNING') {
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    first.child.kill('SIGTERM');
    expect(await first.exited()).toBe(0);
    const second = await spawnService(env);
    try {
      const result = await request(token.resultUri.replace(first.url, second.url));
      expect(result.status).toBe(200);
      expect(parseXml(result.text).result).toMatchObject({ success: 'true' });
      const status = parseXml(
        (await request(`${second.url}/svc/api/rest/jobs/demo/${token.jobId}`)).text,
      );
      expect(status.jobStatus.attempts).toBe('1');
    } finally {
      second.child.kill('SIGTERM');
      await second.exited();
      await database.drop();
    }
  });
});
