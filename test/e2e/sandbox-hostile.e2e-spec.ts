/**
 * Hostile R code against a real service, black-box over HTTP: each script tries to cross a
 * boundary of the native sandbox (secrets, network, other jobs, the read-only system, the limits)
 * and must fail at it, end with a result and leave the node healthy. The service runs as an
 * operator runs it (a separate process, `dist/src/main.js`) with a database URL that carries a
 * password and an admin password, and neither string may appear in any result.
 */
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Client } from 'pg';
import { explodeZip } from '../../src/jobs/job-archive';
import { makeZip } from '../support/zip-fixtures';
import { parseXml, postZip, REST, request, waitForResult } from '../support/rest-client';
import { spawnService, ServiceProcess } from '../support/service-process';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  sleep,
  TestDatabase,
  testEnvironment,
} from '../support/test-service';

const webR = process.env.R_ENGINE === 'webr';
const CHECKOUT = join(__dirname, '..', '..');
/**
 * The wall-clock limit, far above the CPU limit (R_CPU_LIMIT_SECONDS below): a spinning job must
 * reach 3 s of CPU before it, also when a loaded machine gives it a tenth of a core. No test
 * here waits for it.
 */
const JOB_TIMEOUT_SECONDS = 30;
/**
 * Small per-job limits so that the limit scripts end fast (names from docs/configuration.md).
 * CPU time stays below the wall-clock limit so that the CPU limit is the one that ends `repeat {}`.
 */
const LIMITS: Record<string, string> = {
  R_MEMORY_LIMIT_MB: '400',
  R_CPU_LIMIT_SECONDS: '3',
  R_MAX_PROCESSES: '64',
  R_MAX_FILE_MB: '32',
  R_MAX_WRITE_MB: '64',
};

interface Outcome {
  success: string;
  type: string;
  /** The files of a zip result. */
  files: Map<string, string>;
  /** The data of the result as text (the error text of an error result). */
  text: string;
}

/** Lines of a result file, without empty ones. */
function lines(outcome: Outcome, name: string): string[] {
  return (outcome.files.get(name) ?? '').split('\n').filter((line) => line.length > 0);
}

/** Host processes whose command line contains `tag`. */
function hostProcessesWith(tag: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry) && Number(entry) !== process.pid)
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').includes(tag);
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** A PostgreSQL role with a password that owns the fresh test database. */
interface PasswordDatabase {
  url: string;
  password: string;
  drop(): Promise<void>;
}

async function withPasswordRole(database: TestDatabase): Promise<PasswordDatabase> {
  const suffix = randomBytes(4).toString('hex');
  const role = `svc_hostile_${suffix}`;
  const password = `db-secret-${randomBytes(8).toString('hex')}`;
  const url = new URL(database.url ?? '');
  const name = url.pathname.slice(1);
  const admin = new Client({ connectionString: SERVER_DATABASE_URL ?? '' });
  await admin.connect();
  await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`);
  await admin.query(`ALTER DATABASE ${name} OWNER TO ${role}`);
  await admin.end();
  url.username = role;
  url.password = password;
  return {
    url: url.toString(),
    password,
    drop: async () => {
      await database.drop();
      const client = new Client({ connectionString: SERVER_DATABASE_URL ?? '' });
      await client.connect();
      await client.query(`DROP ROLE IF EXISTS ${role}`);
      await client.end();
    },
  };
}

/** Leaves a global variable, an option and files behind in its session. */
const LEAVING_FUNCTIONS = `
svcJsonService <- function(payload) {
  assign("leakedGlobal", 42, envir = globalenv())
  options(svc.leak = TRUE)
  writeLines("x", file.path(tempdir(), "leak.txt"))
  writeLines("x", "leak-cwd.txt")
  "left"
}
`;

/** Looks for what LEAVING_FUNCTIONS left behind. */
const LOOKING_FUNCTIONS = `
svcJsonService <- function(payload) {
  paste(exists("leakedGlobal", envir = globalenv()), isTRUE(getOption("svc.leak")),
    file.exists(file.path(tempdir(), "leak.txt")), file.exists("leak-cwd.txt"))
}
`;

const HOSTILE_FUNCTIONS = `
svcJsonService <- function(payload) {
  if (payload == "hello") return("hello from the sandbox")
  found <- character()
  for (p in list.files("/proc", pattern = "^[0-9]+$", full.names = TRUE)) {
    e <- tryCatch(readBin(file.path(p, "environ"), "raw", 1e6), error = function(e) raw(),
                  warning = function(w) raw())
    e[e == as.raw(0)] <- as.raw(10)
    found <- c(found, grep("^(DATABASE_URL|ADMIN_PASSWORD)=", strsplit(rawToChar(e), "\\n")[[1]], value = TRUE))
  }
  tcp <- tryCatch({ s <- socketConnection("127.0.0.1", 5432, blocking = TRUE, timeout = 2); close(s); "open" },
                  error = function(e) "closed", warning = function(w) "closed")
  config <- tryCatch(length(readLines(file.path("${CHECKOUT}", "config", "default.json"), warn = FALSE)) > 0,
                     error = function(e) FALSE, warning = function(w) FALSE)
  paste0("secrets=", length(found), ";tcp=", tcp, ";config=", config, ";", paste(found, collapse = ";"))
}
`;

/** Reads /proc/<pid>/environ of every visible process and keeps the secret variables. */
const ENVIRON_SCRIPT = `
found <- character()
pids <- list.files("/proc", pattern = "^[0-9]+$", full.names = TRUE)
for (p in pids) {
  e <- tryCatch(readBin(file.path(p, "environ"), "raw", 1e6), error = function(e) raw(),
                warning = function(w) raw())
  e[e == as.raw(0)] <- as.raw(10)
  found <- c(found, grep("^(DATABASE_URL|ADMIN_PASSWORD)=", strsplit(rawToChar(e), "\\n")[[1]], value = TRUE))
}
writeLines(found, "found.txt")
writeLines(as.character(length(pids)), "pids.txt")
`;

/** TCP to PostgreSQL and the service, psql over TCP and the Unix socket: one line each that got through. */
function networkScript(servicePort: number): string {
  return `
reached <- character()
tcp <- function(host, port) tryCatch({
  s <- socketConnection(host, port, blocking = TRUE, open = "r+", timeout = 2); close(s); TRUE
}, error = function(e) FALSE, warning = function(w) FALSE)
if (tcp("127.0.0.1", 5432)) reached <- c(reached, "postgresql-tcp")
if (tcp("127.0.0.1", ${servicePort})) reached <- c(reached, "service-port")
psql <- Sys.which("psql")
if (nzchar(psql)) {
  viaTcp <- suppressWarnings(system2(psql, c("-h", "127.0.0.1", "-U", "postgres", "-d", "postgres",
    "-w", "-tAc", "'select 1'"), stdout = TRUE, stderr = TRUE))
  if (any(viaTcp == "1")) reached <- c(reached, "psql-tcp")
  viaSocket <- suppressWarnings(system2(psql, c("-h", "/var/run/postgresql", "-U", "postgres",
    "-d", "postgres", "-w", "-tAc", "'select 1'"), stdout = TRUE, stderr = TRUE))
  if (any(viaSocket == "1")) reached <- c(reached, "psql-socket")
}
if (file.exists("/var/run/postgresql/.s.PGSQL.5432")) reached <- c(reached, "socket-file-visible")
writeLines(reached, "reached.txt")
`;
}

/** Native R only: webR has its own WebAssembly isolation and no R process to sandbox. */
(webR ? describe.skip : describe).each(['fork', 'spawn'] as const)(
  'hostile R code in the native sandbox (%s mode; native R only, skipped on webR)',
  (mode) => {
    const tag = `svchostile${randomBytes(4).toString('hex')}`;
    /** A leftover `sleep` told apart from any other by its fractional seconds. */
    const sleepSeconds = `999.${randomBytes(2).readUInt16BE(0)}`;
    const adminPassword = `admin-secret-${randomBytes(8).toString('hex')}`;
    let database: TestDatabase;
    let passwordDatabase: PasswordDatabase;
    let service: ServiceProcess;
    let servicePort: number;
    /** Places on the host a hostile script tries to write to; none may exist afterwards. */
    let outsideTargets: string[];

    beforeAll(async () => {
      database = await createTestDatabase();
      passwordDatabase = await withPasswordRole(database);
      service = await spawnService({
        ...testEnvironment(database, {
          DATABASE_URL: passwordDatabase.url,
          ADMIN_USER: 'admin',
          ADMIN_PASSWORD: adminPassword,
          R_ENGINE: 'native',
          R_SCRIPT_MODE: mode,
          SCRIPT_SLOTS: '3',
          JOB_TIMEOUT_SECONDS: String(JOB_TIMEOUT_SECONDS),
          FUNCTION_TIMEOUT_SECONDS: '10',
          // One warm session: calls of two applications meet in it unless the sandbox parts them.
          FUNCTION_SESSIONS: '1',
          APPLICATION_SETTINGS: JSON.stringify({ netapp: { networkAllowed: true } }),
          ...LIMITS,
        }),
        LOG_LEVEL: 'warn',
      });
      servicePort = Number(new URL(service.url).port);
      outsideTargets = [
        `/tmp/${tag}-tmp`,
        `/usr/${tag}-usr`,
        join(CHECKOUT, `${tag}-checkout`),
        join(database.dataDir, `${tag}-datadir`),
      ];
      const functions: Array<[string, string]> = [
        ['hostilefn', HOSTILE_FUNCTIONS],
        ['leavingfn', LEAVING_FUNCTIONS],
        ['lookingfn', LOOKING_FUNCTIONS],
      ];
      for (const [application, code] of functions) {
        const put = await request(`${service.url}${REST}/admin/catalog/R_FUNCTIONS/functions.R`, {
          method: 'PUT',
          headers: {
            'X-SVC-Application-Name': application,
            Authorization: `Basic ${Buffer.from(`admin:${adminPassword}`).toString('base64')}`,
          },
          body: code,
        });
        expect(put.status).toBe(201);
      }
    }, 90000);

    afterAll(async () => {
      for (const pid of [
        ...hostProcessesWith(tag),
        ...hostProcessesWith(`sleep ${sleepSeconds}`),
      ]) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Already gone.
        }
      }
      for (const target of outsideTargets ?? []) {
        rmSync(target, { force: true });
      }
      service?.child.kill('SIGTERM');
      await service?.exited();
      await passwordDatabase?.drop();
    }, 60000);

    /** Neither secret may appear in anything a job gets back. */
    function expectNoSecrets(outcome: Outcome): void {
      const everything = [outcome.text, ...outcome.files.values()].join('\n');
      expect(everything).not.toContain(passwordDatabase.password);
      expect(everything).not.toContain(adminPassword);
    }

    async function submit(files: Record<string, string>, application = 'demo'): Promise<string> {
      const zip = await makeZip(
        Object.entries(files).map(([name, content]) => ({ name, content })),
      );
      const answer = await postZip(service.url, zip, { 'X-SVC-Application-Name': application });
      expect(answer.status).toBe(202);
      return parseXml(answer.text).jobToken.resultUri;
    }

    async function outcome(resultUri: string): Promise<Outcome> {
      const result = parseXml((await waitForResult(resultUri)).text).result;
      const data = await request(result.dataUri);
      const files = new Map<string, string>();
      if (result.type === 'zip') {
        const entries = await explodeZip(data.body, {
          maxEntries: 1000,
          maxUncompressedBytes: 1e8,
          maxCompressionRatio: 1e6,
        });
        entries.forEach((entry) => files.set(entry.name, entry.content.toString('utf8')));
      }
      const answer = { success: result.success, type: result.type, files, text: data.text };
      expectNoSecrets(answer);
      return answer;
    }

    async function run(script: string, application = 'demo'): Promise<Outcome> {
      return outcome(await submit({ 'job.R': script }, application));
    }

    async function expectHealthy(): Promise<void> {
      const health = await request(`${service.url}/svc/api/rest/system/health/check`);
      expect(health.status).toBe(200);
      const normal = await run('writeLines(as.character(6 * 7), "answer.txt")');
      expect(normal.success).toBe('true');
      expect(normal.files.get('answer.txt')).toBe('42\n');
    }

    it('cannot read DATABASE_URL or ADMIN_PASSWORD from /proc/*/environ', async () => {
      const result = await run(ENVIRON_SCRIPT);
      expect(lines(result, 'found.txt')).toEqual([]);
    });

    it('cannot reach PostgreSQL by TCP or Unix socket, nor the service port', async () => {
      const result = await run(networkScript(servicePort));
      expect(result.success).toBe('true');
      expect(lines(result, 'reached.txt')).toEqual([]);
    });

    it('the same network script reaches the service port for an application allowed the network', async () => {
      const result = await run(networkScript(servicePort), 'netapp');
      expect(result.success).toBe('true');
      expect(lines(result, 'reached.txt')).toContain('service-port');
    });

    it('cannot read config/, DATA_DIR, the checkout or /root', async () => {
      const result = await run(`
seen <- character()
readable <- function(path) tryCatch(length(readLines(path, warn = FALSE)) > 0,
  error = function(e) FALSE, warning = function(w) FALSE)
if (readable("${CHECKOUT}/config/default.json")) seen <- c(seen, "config")
if (readable("${CHECKOUT}/package.json")) seen <- c(seen, "checkout")
if (length(list.files("${CHECKOUT}/src", recursive = TRUE)) > 0) seen <- c(seen, "checkout-src")
dataDir <- list.files("${database.dataDir}", recursive = TRUE, all.files = TRUE, full.names = TRUE)
if (length(dataDir) > 0) seen <- c(seen, paste("datadir", dataDir))
if (length(list.files("/root", all.files = TRUE, no.. = TRUE)) > 0) seen <- c(seen, "root")
writeLines(seen, "seen.txt")
`);
      expect(result.success).toBe('true');
      expect(lines(result, 'seen.txt')).toEqual([]);
    });

    it("two jobs released together neither list nor read the other one's directory", async () => {
      const script = (me: string, other: string): string => `
writeLines("${me}", "marker-${tag}-${me}.txt")
roots <- unique(c(dirname(getwd()), dirname(dirname(getwd())), dirname(tempdir()), "/tmp",
  "${database.dataDir}"))
saw <- character()
for (i in 1:20) {
  for (root in roots) {
    hits <- list.files(root, pattern = "^marker-${tag}-${other}\\\\.txt$", recursive = TRUE,
      full.names = TRUE, all.files = TRUE)
    for (hit in hits) saw <- c(saw, paste(hit, tryCatch(readLines(hit), error = function(e) "")))
  }
  if (length(saw) > 0) break
  Sys.sleep(0.2)
}
writeLines(saw, "saw.txt")
`;
      const [first, second] = await Promise.all([
        submit({ 'job.R': script('a', 'b') }),
        submit({ 'job.R': script('b', 'a') }),
      ]);
      const [a, b] = await Promise.all([outcome(first), outcome(second)]);
      expect(a.success).toBe('true');
      expect(b.success).toBe('true');
      expect(lines(a, 'saw.txt')).toEqual([]);
      expect(lines(b, 'saw.txt')).toEqual([]);
    });

    it('sees only its own processes: none of the service, PostgreSQL or other jobs to signal', async () => {
      // Every visible pid is probed with signal 0 (permission check, nothing delivered). Only when
      // the job sees a handful of processes (its own namespace) does it send SIGKILL to all of
      // them; on a host without a sandbox it would otherwise kill the machine's processes.
      const result = await run(`
pids <- setdiff(as.integer(list.files("/proc", pattern = "^[0-9]+$")), Sys.getpid())
cmdline <- function(p) tryCatch({
  r <- readBin(sprintf("/proc/%d/cmdline", p), "raw", 4096)
  r[r == as.raw(0)] <- as.raw(32)
  rawToChar(r)
}, error = function(e) "", warning = function(w) "")
cmd <- vapply(pids, cmdline, "")
signalable <- pids[tools::pskill(pids, 0L)]
writeLines(sprintf("%d %s", pids, cmd), "visible.txt")
writeLines(as.character(signalable), "signalable.txt")
if (length(pids) < 10) tools::pskill(pids, tools::SIGKILL)
`);
      const visible = lines(result, 'visible.txt');
      expect(visible.filter((line) => /node|postgres|main\.js|jest/.test(line))).toEqual([]);
      expect(visible.length).toBeLessThan(10);
      await expectHealthy();
    });

    it('cannot write outside its working directory (host /tmp, /usr, the checkout, DATA_DIR)', async () => {
      const result = await run(`
wrote <- character()
for (target in c(${outsideTargets.map((target) => `"${target}"`).join(', ')})) {
  ok <- tryCatch({ writeLines("x", target); file.exists(target) }, error = function(e) FALSE,
    warning = function(w) FALSE)
  if (ok) wrote <- c(wrote, target)
}
writeLines(wrote, "wrote.txt")
writeLines("mine", "inside.txt")
writeLines("tmp", file.path(tempdir(), "private.txt"))
`);
      expect(result.files.get('inside.txt')).toBe('mine\n');
      expect(outsideTargets.filter((target) => existsSync(target))).toEqual([]);
      expect(lines(result, 'wrote.txt')).toEqual([]);
    });

    it('a fork bomb ends the job with an error naming the process limit', async () => {
      // Bounded at 1000 processes so that a host without a limit survives it.
      const result = await run(
        'system("i=0; while [ $i -lt 1000 ]; do sleep 3 & i=$((i+1)); done; wait")',
      );
      expect(result.success).toBe('false');
      expect(result.text).toMatch(/process(es)? limit|number of processes|processes/i);
      await expectHealthy();
    });

    it('one huge file ends the job with an error naming the file-size limit', async () => {
      // Bounded at 256 MiB so that a host without a limit keeps its disk.
      const result = await run(`
con <- file("big.bin", "wb")
chunk <- raw(1024 * 1024)
for (i in 1:256) writeBin(chunk, con)
close(con)
unlink("big.bin")
`);
      expect(result.success).toBe('false');
      expect(result.text).toMatch(/file size|file-size|file too large/i);
    });

    it('many files filling the disk end the job with an error naming the bytes-written limit', async () => {
      const result = await run(`
chunk <- raw(1024 * 1024)
for (i in 1:256) { writeBin(chunk, "part.bin"); file.rename("part.bin", sprintf("part-%03d.bin", i)) }
unlink(list.files(pattern = "^part-"))
`);
      expect(result.success).toBe('false');
      expect(result.text).toMatch(/bytes written|written|disk/i);
    });

    it('allocating memory without end ends the job with an error naming memory', async () => {
      const result = await run('x <- list()\nrepeat x[[length(x) + 1L]] <- numeric(1e7)');
      expect(result.success).toBe('false');
      expect(result.text).toMatch(/memory|cannot allocate/i);
    });

    it('spinning on the CPU ends the job with an error naming the CPU-time limit', async () => {
      const result = await run('repeat {}');
      expect(result.success).toBe('false');
      expect(result.text).toMatch(/CPU/);
    });

    it('a background process (sleep &, double fork, setsid) ends with its job and never sees the next job', async () => {
      // The leftover looks for the next job's marker for 20 s and, when it finds it, writes a file
      // into that job's directory: the next job's result would carry it.
      const watcher = `i=0; while [ $i -lt 100 ]; do for f in $(find ${'$'}(dirname ${'$'}(dirname ${'$'}PWD)) /tmp ${database.dataDir} -name next-${tag}.txt 2>/dev/null); do echo ${tag} > ${'$'}(dirname ${'$'}f)/intruder.txt; done; i=$((i+1)); sleep 0.2; done`;
      const first = await run(`
system("sleep ${sleepSeconds} &")
system("(sh -c '${watcher} # ${tag}' &) &")
system("setsid sh -c '${watcher} # ${tag}' > /dev/null 2>&1 &")
writeLines("left", "left.txt")
`);
      expect(first.files.get('left.txt')).toBe('left\n');
      // The job's processes end with it; give the kill a moment to be reaped.
      const remaining = (): number[] => [
        ...hostProcessesWith(tag),
        ...hostProcessesWith(`sleep ${sleepSeconds}`),
      ];
      for (let i = 0; i < 20 && remaining().length > 0; i++) {
        await sleep(100);
      }
      expect(remaining()).toEqual([]);
      const next = await run(`
writeLines("next", "next-${tag}.txt")
Sys.sleep(2)
`);
      expect(next.success).toBe('true');
      expect([...next.files.keys()]).not.toContain('intruder.txt');
    });

    it('a chain that keeps forking itself on and exiting (outrunning one kill pass) ends with its job', async () => {
      // Each shell forks the next one and exits at once: at any moment the chain is one or two
      // short-lived processes, and a single listing-then-kill pass misses the newest.
      const hopper = await run(`
system("sh -c 'hop() { hop & }; hop # ${tag}-hop' > /dev/null 2>&1 &")
Sys.sleep(0.5)
writeLines("hopped", "hopped.txt")
`);
      expect(hopper.files.get('hopped.txt')).toBe('hopped\n');
      const remaining = (): number[] => hostProcessesWith(`${tag}-hop`);
      for (let i = 0; i < 20 && remaining().length > 0; i++) {
        await sleep(100);
      }
      expect(remaining()).toEqual([]);
      await expectHealthy();
    });

    it('a function call cannot read secrets, the checkout or reach PostgreSQL', async () => {
      const answer = await request(`${service.url}${REST}/process`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-SVC-Application-Name': 'hostilefn' },
        body: 'attack',
      });
      expect(answer.text).not.toContain(passwordDatabase.password);
      expect(answer.text).not.toContain(adminPassword);
      expect(answer.text).toContain('secrets=0;tcp=closed;config=FALSE');
    });

    it("nothing one application's call leaves behind is seen by a call of another application", async () => {
      const call = (application: string): Promise<Awaited<ReturnType<typeof request>>> =>
        request(`${service.url}${REST}/process`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'X-SVC-Application-Name': application },
          body: 'x',
        });
      expect((await call('leavingfn')).text).toContain('left');
      const looked = await call('lookingfn');
      expect(looked.status).toBe(200);
      expect(looked.text).toContain('FALSE FALSE FALSE FALSE');
    });

    it('after the corpus, normal jobs and /process calls still succeed on the same node', async () => {
      await expectHealthy();
      const answer = await request(`${service.url}${REST}/process`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-SVC-Application-Name': 'hostilefn' },
        body: 'hello',
      });
      expect(answer.status).toBe(200);
      expect(answer.text).toContain('hello from the sandbox');
    });
  },
);
