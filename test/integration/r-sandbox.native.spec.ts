import { createServer, type Server } from 'node:net';
import { once } from 'node:events';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NativeREngine } from '../../src/r-engine/native/native-r.engine';
import { probeSandbox } from '../../src/r-engine/launch/r-launcher';
import { findRscript, type NativeRConfig } from '../../src/r-engine/launch/r-location';
import { findBwrap } from '../../src/r-engine/launch/r-sandbox';
import {
  seccompArchOf,
  syscallNumber,
  type SyscallName,
} from '../../src/r-engine/launch/seccomp-filter';
import type { ScriptRunRequest } from '../../src/r-engine/r-engine';

const base: NativeRConfig = {
  rHome: null,
  rscriptPath: null,
  rMemoryLimitMb: 400,
  jobTimeoutSeconds: 20,
  rSandbox: 'bwrap',
  rCpuLimitSeconds: 2,
  rMaxProcesses: 24,
  rMaxFileMb: 4,
  rMaxWriteMb: 12,
  scriptSlots: 2,
};
const runnable =
  process.env.R_ENGINE !== 'webr' && findRscript(base) !== null && findBwrap() !== null;
const describeSandbox = runnable ? describe : describe.skip;
const skipped = runnable ? '' : ' (skipped: needs native R and bubblewrap)';
const quiet = { log: () => undefined, warn: () => undefined };
const rscript = findRscript(base);
const arch = seccompArchOf(process.arch);
const EPERM = 1;
const ENOSYS = 38;

for (const mode of ['fork', 'spawn'] as const) {
  describeSandbox(`R in bubblewrap, R_SCRIPT_MODE=${mode}${skipped}`, () => {
    const engine = new NativeREngine({ ...base, rScriptMode: mode }, quiet);
    let root: string;
    let listener: Server;
    let port = 0;
    let count = 0;

    beforeAll(async () => {
      root = await mkdtemp(join(tmpdir(), 'svc-sandbox-spec-'));
      listener = createServer((socket) => socket.end('hello\n'));
      listener.listen(0, '127.0.0.1');
      await once(listener, 'listening');
      port = (listener.address() as { port: number }).port;
      process.env.SVC_SANDBOX_SPEC_SECRET = 'secret-of-the-service';
      await engine.start();
    });

    afterAll(async () => {
      await engine.stop();
      listener.close();
      delete process.env.SVC_SANDBOX_SPEC_SECRET;
      await rm(root, { recursive: true, force: true });
    });

    async function run(script: string, extra: Partial<ScriptRunRequest> = {}) {
      const workDir = join(root, `job-${++count}`, 'work');
      await mkdir(workDir, { recursive: true });
      await writeFile(join(workDir, 'script.R'), script);
      const outcome = await engine.runScript({
        jobId: `job-${count}`,
        workDir,
        scriptName: 'script.R',
        timeoutMs: 15_000,
        ...extra,
      });
      const read = (name: string) => readFile(join(workDir, name), 'utf8').catch(() => '');
      return { outcome, workDir, read };
    }

    it('is in force', () => {
      expect(engine.sandbox).toBe('bwrap');
      expect(engine.mode).toBe(mode);
    });

    it("sees none of the service's environment, processes or files", async () => {
      const { outcome, read } = await run(`
        writeLines(paste(names(Sys.getenv()), Sys.getenv(), sep = "="), "env.txt")
        writeLines(list.files("/proc", pattern = "^[0-9]+$"), "pids.txt")
        seen <- c(${JSON.stringify(process.cwd())}, ${JSON.stringify(root)}, "/root", "/home", "/var/run/postgresql", "/etc/postgresql")
        writeLines(seen[file.exists(seen)], "seen.txt")
      `);
      expect(outcome).toMatchObject({ status: 'succeeded' });
      expect(await read('env.txt')).not.toContain('secret-of-the-service');
      expect(await read('env.txt')).not.toMatch(/DATABASE_URL|ADMIN_PASSWORD/);
      // Its own R and the sandbox's init (and the fork server, its reader in fork mode).
      expect((await read('pids.txt')).trim().split('\n').length).toBeLessThanOrEqual(5);
      expect((await read('seen.txt')).trim()).toBe('');
    });

    it('cannot connect anywhere unless its application is allowed the network', async () => {
      const script = `con <- socketConnection("127.0.0.1", ${port}, blocking = TRUE, timeout = 3); writeLines(readLines(con, 1L), "got.txt")`;
      const closed = await run(script);
      expect(closed.outcome).toMatchObject({ status: 'failed', reason: 'r-error' });
      const open = await run(script, { network: true });
      expect(open.outcome).toMatchObject({ status: 'succeeded' });
      expect(await open.read('got.txt')).toBe('hello\n');
    });

    it('writes nothing outside its working and temporary directories', async () => {
      const targets = [
        '/tmp/svc-escape',
        '/usr/svc-escape',
        join(root, 'svc-escape'),
        '/dev/shm/svc-escape',
      ];
      const { outcome, read } = await run(`
        targets <- ${JSON.stringify(targets).replace('[', 'c(').replace(']', ')')}
        ok <- vapply(targets, function(p) isTRUE(tryCatch({ writeLines("x", p); TRUE }, error = function(e) FALSE, warning = function(w) FALSE)), TRUE)
        writeLines(targets[ok], "written.txt")
        writeLines("x", file.path(tempdir(), "t.txt"))
        writeLines("mine", "mine.txt")
      `);
      expect(outcome).toMatchObject({ status: 'succeeded' });
      expect((await read('written.txt')).trim()).toBe('');
      expect(await read('mine.txt')).toBe('mine\n');
      for (const target of targets) {
        expect(existsSync(target)).toBe(false);
      }
    });

    it.each([
      ['CPU time', 'repeat {}', /CPU time limit of 2 s/],
      ['memory', 'x <- numeric(1e9)', /memory limit of 400 MiB/],
      [
        'processes',
        'for (i in 1:60) system("sleep 20 &"); stop("still here")',
        /limit of 24 processes/,
      ],
      [
        'file size',
        'con <- file("big", "wb"); for (i in 1:20) writeBin(raw(1e6), con); close(con)',
        /file size limit of 4 MiB/,
      ],
      [
        'bytes written',
        'for (i in 1:30) writeBin(raw(1e6), sprintf("f%d", i)); Sys.sleep(3)',
        /12 MiB of bytes written/,
      ],
    ])('ends a job at its %s limit with a result that names it', async (_, script, message) => {
      const { outcome } = await run(script);
      expect(outcome).toMatchObject({ status: 'failed', reason: 'limit', message });
      // The engine carries on.
      expect((await run('writeLines("ok", "ok.txt")')).outcome).toMatchObject({
        status: 'succeeded',
      });
    });

    // perl (in /usr/bin) makes the raw system calls that R cannot; each line: number, errno.
    (arch ? it : it.skip)(
      'is refused ptrace, process_vm_readv, the keyring, SysV shared memory and new namespaces',
      async () => {
        const number = (name: SyscallName) => syscallNumber(name, arch ?? 'x86_64');
        const calls: [SyscallName, ...(number | string)[]][] = [
          ['ptrace', 0], // PTRACE_TRACEME: R's own child asks to be traced
          ['process_vm_readv', '$$', 0, 0, 0, 0, 0],
          ['keyctl', 0, -3, 1], // KEYCTL_GET_KEYRING_ID of the session keyring
          ['add_key', '$type', '$description', '$payload', 1, -3],
          ['shmget', 0, 4096, 0o1600], // IPC_PRIVATE, IPC_CREAT | 0600
          ['unshare', 0x10000000], // CLONE_NEWUSER
          ['clone3', 0, 0],
        ];
        // Strings are passed as pointers, from variables (perl refuses literals there).
        const perl = calls
          .map(
            ([name, ...args]) =>
              `print syscall(${[number(name), ...args].join(', ')}) < 0 ? $! + 0 : 0, "\\n";`,
          )
          .join(' ');
        const strings = 'my ($type, $description, $payload) = ("user", "svc-marker", "x");';
        const { outcome, read } = await run(
          `writeLines(system2("perl", c("-e", shQuote(${JSON.stringify(`${strings} ${perl}`)})), stdout = TRUE), "errno.txt")`,
        );
        expect(outcome).toMatchObject({ status: 'succeeded' });
        const errno = (await read('errno.txt')).trim().split('\n').map(Number);
        expect(Object.fromEntries(calls.map(([name], index) => [name, errno[index]]))).toEqual({
          ptrace: EPERM,
          process_vm_readv: EPERM,
          keyctl: EPERM,
          add_key: EPERM,
          shmget: EPERM,
          unshare: EPERM,
          clone3: ENOSYS,
        });
      },
    );

    it('cannot make a user namespace', async () => {
      const { outcome, read } = await run(`
        status <- c(system2("unshare", c("-U", "true")), system2("unshare", c("-Ur", "true")))
        writeLines(as.character(status), "status.txt")
      `);
      expect(outcome).toMatchObject({ status: 'succeeded' });
      const status = (await read('status.txt')).trim().split('\n');
      expect(status).toHaveLength(2);
      expect(status).not.toContain('0');
    });

    it('still runs plain jobs: a PDF plot, mclapply on 2 cores, system()', async () => {
      const { outcome, read, workDir } = await run(`
        pdf("plot.pdf"); plot(1:10); invisible(dev.off())
        doubled <- unlist(parallel::mclapply(1:2, function(i) i * 2L, mc.cores = 2L))
        writeLines(as.character(doubled), "cores.txt")
        writeLines(system("ls", intern = TRUE), "ls.txt")
        fds <- list.files("/proc/self/fd", full.names = TRUE)
        writeLines(Sys.readlink(fds), "fds.txt")
      `);
      expect(outcome).toMatchObject({ status: 'succeeded' });
      expect((await readFile(join(workDir, 'plot.pdf'))).subarray(0, 4).toString()).toBe('%PDF');
      expect(await read('cores.txt')).toBe('2\n4\n');
      expect(await read('ls.txt')).toContain('script.R');
      // bubblewrap closed the filter's descriptor before R started.
      expect(await read('fds.txt')).not.toMatch(/seccomp|\.bpf/);
    });

    if (mode === 'fork') {
      it("cannot read or write its fork server's memory or environment", async () => {
        const { outcome, read } = await run(`
          ppid <- as.integer(sub("^PPid:[[:space:]]*", "", grep("^PPid:", readLines("/proc/self/status"), value = TRUE)))
          server <- readBin(sprintf("/proc/%d/cmdline", ppid), "raw", 65536L)
          server <- rawToChar(replace(server, server == as.raw(0L), as.raw(32L)))
          opens <- function(path, mode) tryCatch({ con <- file(path, mode); close(con); "opened" },
                                                 error = function(e) "refused", warning = function(w) "refused")
          proc <- function(name) sprintf("/proc/%d/%s", ppid, name)
          writeLines(c(grepl("fork-server.R", server, fixed = TRUE),
                       opens(proc("mem"), "r+b"), opens(proc("mem"), "rb"), opens(proc("environ"), "rb")),
                     "access.txt")
          # A separate process of the sandbox (not a fork of the server) fares no better.
          writeLines(system2("sh", c("-c", shQuote(sprintf("cat %s >/dev/null 2>&1 && echo opened || echo refused", proc("environ")))), stdout = TRUE),
                     "sibling.txt")
        `);
        expect(outcome).toMatchObject({ status: 'succeeded' });
        expect((await read('access.txt')).trim().split('\n')).toEqual([
          'TRUE',
          'refused',
          'refused',
          'refused',
        ]);
        expect((await read('sibling.txt')).trim()).toBe('refused');
      });
    }

    it('ends what a job left behind before the next job runs', async () => {
      const first = await run(
        'system("sh -c \'sleep 30 & sleep 31 &\'"); system("setsid sleep 32 &")',
      );
      expect(first.outcome).toMatchObject({ status: 'succeeded' });
      const { outcome, read } = await run(`
        pids <- list.files("/proc", pattern = "^[0-9]+$")
        cmd <- vapply(pids, function(p) paste(tryCatch(readLines(file.path("/proc", p, "cmdline"), warn = FALSE), error = function(e) ""), collapse = " "), "")
        writeLines(cmd[grepl("sleep", cmd)], "sleepers.txt")
      `);
      expect(outcome).toMatchObject({ status: 'succeeded' });
      expect((await read('sleepers.txt')).trim()).toBe('');
    });
  });
}

describeSandbox(`R_SANDBOX start-up${skipped}`, () => {
  const path = process.env.PATH;
  afterEach(() => {
    process.env.PATH = path;
  });

  it('refuses to start without a sandbox when authentication is on, saying how to fix it', async () => {
    process.env.PATH = '/nonexistent';
    const engine = new NativeREngine(
      { ...base, rSandbox: 'auto', authMode: 'basic', rscriptPath: rscript },
      quiet,
    );
    await expect(engine.start()).rejects.toThrow(
      /no sandbox for R .*bubblewrap.*AUTH_MODE=basic.*R_SANDBOX=none/,
    );
    await engine.stop();
  });

  it('warns once and runs without a sandbox when none is available and authentication is off', async () => {
    process.env.PATH = '/nonexistent';
    const warnings: string[] = [];
    const engine = new NativeREngine(
      { ...base, rSandbox: 'auto', rScriptMode: 'spawn', rscriptPath: rscript },
      { log: () => undefined, warn: (line) => warnings.push(line) },
    );
    await engine.start();
    expect(engine.sandbox).toBe('none');
    expect(warnings).toEqual([expect.stringMatching(/no sandbox for R.*install bubblewrap/)]);
    await engine.stop();
  });

  it('leaves nothing in the temporary directory after stop', async () => {
    const engine = new NativeREngine({ ...base, rScriptMode: 'fork' }, quiet);
    await engine.start();
    const runtime = engine.runtimeDirectory as string;
    expect(existsSync(join(runtime, 'slot-0'))).toBe(true);
    await engine.stop();
    expect(existsSync(runtime)).toBe(false);
  });

  // As root, R runs as nobody in the sandbox: a checkout under a directory closed to other users
  // (a home directory of mode 700) is out of its reach. Not as another user: R then is that user.
  const asRoot = process.getuid?.() === 0;
  (asRoot ? it : it.skip)(
    `names R's programs out of the sandbox user's reach and the chmod, not bubblewrap, as the cause${asRoot ? '' : ' (skipped: needs root)'}`,
    async () => {
      const home = await mkdtemp(join(tmpdir(), 'svc-closed-home-'));
      const probeDir = await mkdtemp(join(tmpdir(), 'svc-probe-'));
      try {
        const sources = join(home, 'svc', 'dist', 'src', 'r-engine', 'r');
        await mkdir(sources, { recursive: true });
        await writeFile(join(sources, 'session.R'), '');
        await chmod(home, 0o700);
        const problem = probeSandbox(
          { rscript: rscript as string, rHome: null, sourcesDir: sources },
          probeDir,
        );
        expect(problem?.cause).toMatch(
          new RegExp(
            `Can't find source path ${sources}: Permission denied.*cannot reach ${sources} \\(closed to other users: ${home}\\)$`,
          ),
        );
        expect(problem?.fix).toMatch(new RegExp(`^chmod o\\+x ${home}, or move the checkout`));

        await chmod(home, 0o711);
        expect(
          probeSandbox({ rscript: rscript as string, rHome: null, sourcesDir: sources }, probeDir),
        ).toBeNull();
      } finally {
        await rm(home, { recursive: true, force: true });
        await rm(probeDir, { recursive: true, force: true });
      }
    },
  );
});
