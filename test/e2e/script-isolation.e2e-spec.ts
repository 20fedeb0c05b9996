/**
 * Jobs running side by side see none of each other's files.
 *
 * @ci-pass embedded
 */
import { readdirSync, readFileSync } from 'node:fs';
import { explodeZip } from '../../src/jobs/job-archive';
import { makeZip } from '../support/zip-fixtures';
import { parseXml, postZip, request, waitForResult } from '../support/rest-client';
import { startTestService, TestService, waitFor } from '../support/test-service';

const webR = process.env.R_ENGINE === 'webr';
const forkMode = !webR && process.env.R_SCRIPT_MODE !== 'spawn' && process.platform === 'linux';
/** Native R only: webR has no address-space limit to configure and no R process to kill. */
const itNative = webR ? it.skip : it;
const itFork = forkMode ? it : it.skip;

interface Outcome {
  success: string;
  type: string;
  /** The files of a zip result, or the text of an error result. */
  files: Map<string, string>;
  text: string;
}

async function submit(service: TestService, files: Record<string, string>): Promise<string> {
  const zip = await makeZip(Object.entries(files).map(([name, content]) => ({ name, content })));
  const answer = await postZip(service.url, zip);
  expect(answer.status).toBe(202);
  return parseXml(answer.text).jobToken.resultUri;
}

async function outcome(resultUri: string): Promise<Outcome> {
  const result = parseXml((await waitForResult(resultUri)).text).result;
  const data = await request(result.dataUri);
  const files = new Map<string, string>();
  if (result.type === 'zip') {
    const zip = Buffer.from(await (await fetch(result.dataUri)).arrayBuffer());
    const entries = await explodeZip(zip, {
      maxEntries: 100,
      maxUncompressedBytes: 1e8,
      maxCompressionRatio: 1e6,
    });
    entries.forEach((entry) => files.set(entry.name, entry.content.toString('utf8')));
  }
  return { success: result.success, type: result.type, files, text: data.text };
}

async function run(service: TestService, script: string): Promise<Outcome> {
  return outcome(await submit(service, { 'job.R': script }));
}

/** Pids of the R fork servers this test process started (children running fork-server.R). */
function forkServers(): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        return (
          ppid === process.pid &&
          readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('fork-server.R')
        );
      } catch {
        return false;
      }
    })
    .map(Number);
}

describe(`script jobs stay apart from each other and from the service (${webR ? 'webR' : forkMode ? 'native, fork' : 'native, spawn'})`, () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService({
      JOB_TIMEOUT_SECONDS: '3',
      SCRIPT_SLOTS: '2',
      R_MEMORY_LIMIT_MB: '600',
    });
  });
  afterAll(async () => {
    await service.stop();
  });

  it('a job that leaves R with quit(status = 3) gets an error result; the next job runs', async () => {
    const quit = await run(
      service,
      'cat("bye\\n")\nquit(status = 3)\nwriteLines("no", "never.txt")',
    );
    expect(quit).toMatchObject({ success: 'false', type: 'txt' });
    expect(quit.text).toMatch(/status 3/);
    const next = await run(service, 'writeLines("ok", "next.txt")');
    expect(next.success).toBe('true');
    expect(next.files.get('next.txt')).toBe('ok\n');
  });

  it('a job that runs for ever is stopped at the time limit; the next job runs', async () => {
    const endless = await run(service, 'repeat {}');
    expect(endless).toMatchObject({ success: 'false', type: 'txt' });
    expect(endless.text).toMatch(/time limit of 3 s/);
    expect((await run(service, 'writeLines("ok", "next.txt")')).success).toBe('true');
  });

  itNative(
    'a job that allocates without end fails under R_MEMORY_LIMIT_MB; the service is fine',
    async () => {
      // 800 MB a step, past the 600 MB limit at once: zeroing pages is slow on a busy host, and the
      // test is about the limit, not the time limit.
      const greedy = await run(service, 'x <- list()\nrepeat x[[length(x) + 1L]] <- numeric(1e8)');
      expect(greedy).toMatchObject({ success: 'false', type: 'txt' });
      expect(greedy.text).toMatch(/cannot allocate/);
      expect((await run(service, 'writeLines("ok", "next.txt")')).success).toBe('true');
    },
  );

  it('two jobs running together that write the same file names keep their own files', async () => {
    const script = (n: number): string =>
      `writeLines("${n}", "same.txt")\nSys.sleep(1)\nwriteLines(readLines("same.txt"), "again.txt")`;
    const [first, second] = await Promise.all([
      submit(service, { 'job.R': script(1) }),
      submit(service, { 'job.R': script(2) }),
    ]);
    const [one, two] = await Promise.all([outcome(first), outcome(second)]);
    expect([...one.files.entries()].sort()).toEqual([
      ['again.txt', '1\n'],
      ['same.txt', '1\n'],
    ]);
    expect([...two.files.entries()].sort()).toEqual([
      ['again.txt', '2\n'],
      ['same.txt', '2\n'],
    ]);
  });

  it('a job does not see the files of a job running beside it', async () => {
    const other = await submit(service, {
      'job.R': 'writeLines("secret", "secret-of-other.txt")\nSys.sleep(1.5)',
      'input-of-other.csv': 'x\n1\n',
    });
    const probe = await run(
      service,
      [
        'Sys.sleep(0.5)',
        'writeLines(list.files("..", recursive = TRUE, all.files = TRUE), "parent.txt")',
        'writeLines(list.files(tempdir(), recursive = TRUE, all.files = TRUE), "tmp.txt")',
      ].join('\n'),
    );
    expect((await outcome(other)).success).toBe('true');
    expect(probe.success).toBe('true');
    const seen = `${probe.files.get('parent.txt') ?? ''}${probe.files.get('tmp.txt') ?? ''}`;
    expect(seen).not.toMatch(/of-other/);
  });

  it.each([
    ['one file', 'writeLines("x", file.path(tempdir(), "left-1.txt"))'],
    [
      'many files and directories',
      [
        'for (i in 1:50) writeLines("x", file.path(tempdir(), paste0("left-", i, ".txt")))',
        'dir.create(file.path(tempdir(), "left", "deeper"), recursive = TRUE)',
        'writeLines("x", file.path(tempdir(), "left", "deeper", "left.txt"))',
      ].join('\n'),
    ],
  ])('the temporary files a job leaves (%s) are gone for the next jobs', async (_what, script) => {
    expect((await run(service, `${script}\nwriteLines("ok", "ok.txt")`)).success).toBe('true');
    // Two at once take both slots: one of them runs where the first job ran.
    const listing =
      'writeLines(list.files(tempdir(), recursive = TRUE, all.files = TRUE), "tmp.txt")';
    const probes = await Promise.all([run(service, listing), run(service, listing)]);
    for (const probe of probes) {
      expect(probe.success).toBe('true');
      expect(probe.files.get('tmp.txt') ?? '').not.toMatch(/left/);
    }
  });

  it('variables, options and environment variables of one job are not seen by the next', async () => {
    const first = await run(
      service,
      'leaked <- 42\noptions(svc.leak = TRUE)\nSys.setenv(SVC_LEAK = "yes")\nwriteLines("set", "set.txt")',
    );
    expect(first.success).toBe('true');
    const next = await run(
      service,
      [
        'writeLines(c(',
        '  paste(setdiff(ls(globalenv(), all.names = TRUE), ".Random.seed"), collapse = ","),',
        '  as.character(exists("leaked")),',
        '  as.character(is.null(getOption("svc.leak"))),',
        '  Sys.getenv("SVC_LEAK")',
        '), "state.txt")',
      ].join('\n'),
    );
    const [globals, exists, noOption, variable] = (next.files.get('state.txt') ?? '').split('\n');
    expect([globals, exists, noOption]).toEqual(['', 'FALSE', 'TRUE']);
    if (!webR) {
      // webR runs every job in one process: its environment variables are shared (see architecture.md).
      expect(variable).toBe('');
    }
  });

  it('R does not see the service’s environment (no DATABASE_URL)', async () => {
    const probe = await run(
      service,
      'writeLines(c(Sys.getenv("DATABASE_URL"), Sys.getenv("PATH") != ""), "env.txt")',
    );
    expect(probe.files.get('env.txt')).toBe('\nTRUE\n');
  });

  itFork('a fork server killed between jobs is started again; the next job succeeds', async () => {
    const [server] = forkServers();
    expect(server).toBeGreaterThan(0);
    process.kill(server, 'SIGKILL');
    await waitFor(
      () => Promise.resolve(forkServers().some((pid) => pid !== server)),
      30_000,
      'a new fork server',
    );
    const next = await run(service, 'writeLines("after", "after.txt")');
    expect(next.success).toBe('true');
    expect(next.files.get('after.txt')).toBe('after\n');
  });
});
