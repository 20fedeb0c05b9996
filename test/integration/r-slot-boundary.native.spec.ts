import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NativeREngine } from '../../src/r-engine/native/native-r.engine';
import { findRscript, type NativeRConfig } from '../../src/r-engine/launch/r-location';
import { findBwrap } from '../../src/r-engine/launch/r-sandbox';
import type { ScriptRunRequest } from '../../src/r-engine/r-engine';

/**
 * What a job leaves in its fork server's slot cannot reach the service or the slot's next job:
 * links and FIFOs where the service reads, names of the slot's own directories, processes and
 * R connections, System V IPC objects, and a slot that served another application.
 */
const base: NativeRConfig = {
  rHome: null,
  rscriptPath: null,
  rMemoryLimitMb: 600,
  jobTimeoutSeconds: 30,
  rSandbox: 'bwrap',
  rScriptMode: 'fork',
  // One slot: every job runs on the same fork server, the attacker's next to its victim's.
  scriptSlots: 1,
};
const runnable =
  process.env.R_ENGINE !== 'webr' &&
  findRscript(base) !== null &&
  findBwrap() !== null &&
  process.getuid?.() === 0;
const describeSlot = runnable ? describe : describe.skip;
const skipped = runnable ? '' : ' (skipped: needs native R, bubblewrap and root)';
const quiet = { log: () => undefined, warn: () => undefined };

describeSlot(`a fork server's slot between jobs${skipped}`, () => {
  const engine = new NativeREngine(base, quiet);
  let root: string;
  let canary: string;
  let count = 0;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'svc-slot-spec-'));
    canary = await mkdtemp(join(tmpdir(), 'svc-canary-'));
    await writeFile(join(canary, 'secret.txt'), 'canary-secret\n');
    process.env.SVC_SLOT_SPEC_SECRET = 'secret-of-the-service';
    await engine.start();
  });

  afterAll(async () => {
    await engine.stop();
    delete process.env.SVC_SLOT_SPEC_SECRET;
    await rm(root, { recursive: true, force: true });
    await rm(canary, { recursive: true, force: true });
  });

  async function run(script: string, extra: Partial<ScriptRunRequest> = {}) {
    const workDir = join(root, `job-${++count}`, 'work');
    await mkdir(workDir, { recursive: true });
    await writeFile(join(workDir, 'script.R'), script);
    const lines: string[] = [];
    const outcome = await engine.runScript({
      jobId: `job-${count}`,
      workDir,
      scriptName: 'script.R',
      timeoutMs: 20_000,
      applicationName: 'plain',
      onOutput: (_stream, line) => lines.push(line),
      ...extra,
    });
    const read = (name: string) => readFile(join(workDir, name), 'utf8').catch(() => '');
    return { outcome, read, log: lines.join('\n') };
  }

  const plainJob = async (): Promise<void> => {
    const { outcome, read } = await run('writeLines("fine", "ok.txt")');
    expect(outcome).toMatchObject({ status: 'succeeded' });
    expect(await read('ok.txt')).toBe('fine\n');
  };

  it('cannot replace the names of the slot the service reads, moves or cleans', async () => {
    const { outcome, read } = await run(
      `
      slot <- dirname(getwd())
      private <- dirname(tempdir())
      tries <- c(
        server = file.rename(file.path(slot, "server-tmp"), file.path(slot, "gone")),
        private = file.rename(private, file.path(slot, "gone2")),
        link = file.symlink(${JSON.stringify(canary)}, file.path(slot, "private2")),
        status = file.symlink("/proc/self/environ", file.path(private, "error.txt")),
        log = file.symlink(${JSON.stringify(join(canary, 'secret.txt'))}, "out.log"),
        fifo = system("mkfifo written.txt") == 0
      )
      writeLines(paste(names(tries), tries), "tries.txt")
      stop("look at my files")
      `,
      { applicationName: 'evil' },
    );
    expect(outcome).toMatchObject({
      status: 'failed',
      reason: 'r-error',
      message: 'look at my files',
    });
    const tries = await read('tries.txt');
    for (const name of ['server', 'private', 'link', 'status']) {
      expect(tries).toContain(`${name} FALSE`);
    }
    expect(JSON.stringify(outcome)).not.toContain('secret-of-the-service');
    expect(JSON.stringify(outcome)).not.toContain('canary-secret');
    await plainJob();
    expect(await readFile(join(canary, 'secret.txt'), 'utf8')).toBe('canary-secret\n');
  });

  it("leaves nothing of a job in the server's R session directory for the next job", async () => {
    const session = 'Sys.getenv("R_SESSION_TMPDIR")';
    const first = await run(`
      writeLines("left", file.path(${session}, "left.txt"))
      beside <- file.create(file.path(dirname(${session}), "beside.txt"))
      writeLines(as.character(beside), "beside.txt")
      # R's own C code writes there too: a PDF is compressed through a temporary file.
      pdf("plot.pdf"); plot(1:10); invisible(dev.off())
    `);
    expect(first.outcome).toMatchObject({ status: 'succeeded' });
    expect(await first.read('beside.txt')).toBe('FALSE\n');
    expect(first.log).not.toContain('Cannot open temporary file');
    const next = await run(
      `writeLines(as.character(file.exists(file.path(${session}, "left.txt"))), "seen.txt")`,
    );
    expect(next.outcome).toMatchObject({ status: 'succeeded' });
    expect(await next.read('seen.txt')).toBe('FALSE\n');
  });

  it('a FIFO or a link where R writes its console output neither blocks nor leaks', async () => {
    const { outcome, log } = await run(`
      system("mkfifo out.log")
      file.symlink("/proc/self/environ", "environ.txt")
      cat("printed\\n")
    `);
    expect(outcome).toMatchObject({ status: 'succeeded' });
    expect(log).toContain('printed');
    expect(log).not.toContain('secret-of-the-service');
    await plainJob();
  });

  it('a job that leaves hundreds of processes does not use up the server (R connections)', async () => {
    for (let i = 0; i < 3; i += 1) {
      const { outcome } = await run(
        'for (i in 1:150) system("sleep 0.01 &")\nwriteLines("left", "left.txt")',
      );
      expect(outcome).toMatchObject({ status: 'succeeded' });
    }
    for (let i = 0; i < 3; i += 1) {
      await plainJob();
    }
  });

  it('leaves no System V IPC object of a job to the next job', async () => {
    // The sandbox's filter refuses SysV IPC; what gets through is removed after the job.
    const { outcome } = await run(
      'made <- system("ipcmk -M 4194304 >/dev/null 2>&1") == 0\nwriteLines(as.character(made), "made.txt")',
    );
    expect(outcome).toMatchObject({ status: 'succeeded' });
    const next = await run('writeLines(readLines("/proc/sysvipc/shm"), "shm.txt")');
    expect(next.outcome).toMatchObject({ status: 'succeeded' });
    // The header line only: no segment is left.
    expect((await next.read('shm.txt')).trim().split('\n')).toHaveLength(1);
  });

  it('never lets two applications share a fork server: the slot is recycled between them', async () => {
    const pidOf = async (applicationName: string): Promise<string> => {
      const { outcome, read } = await run(
        'writeLines(strsplit(readLines("/proc/self/stat"), " ")[[1]][[4]], "ppid.txt")',
        {
          applicationName,
        },
      );
      expect(outcome).toEqual({ status: 'succeeded', rCpuMs: expect.any(Number) });
      return read('ppid.txt');
    };
    await pidOf('alpha');
    const alphaServer = engine.forkServerPid;
    // The same application keeps its warm server.
    await pidOf('alpha');
    expect(engine.forkServerPid).toBe(alphaServer);
    await pidOf('beta');
    expect(engine.forkServerPid).not.toBe(alphaServer);
    // The canary stays, whatever ran.
    expect((await stat(join(canary, 'secret.txt'))).isFile()).toBe(true);
  });
});
