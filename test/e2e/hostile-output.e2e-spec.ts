/**
 * Everything a job wrote is hostile: R code that plants links, FIFOs, sockets, odd names, deep
 * trees and floods where the service reads, lists, removes or follows what a job left, against a
 * real service run as in production (a separate process, root, native R in bubblewrap, a database
 * URL with a password and an admin password in its environment) and a canary directory on the
 * host that no job may read or remove. Every attack is a job of application `evil`; after it:
 * no secret or canary text in any answer (result, data, status, log), the canary unchanged, the
 * service answering its health checks while the job ran and after, the job ended, and a plain job
 * of application `plain` succeeding with its expected result (in fork mode on the same slot and
 * fork server: SCRIPT_SLOTS=1). Each case collects what went wrong as labelled lines and asserts
 * that there are none, so a failure names the case and what leaked.
 *
 * A case that froze the service (a FIFO read on the event loop, say) would take every later case
 * with it: before each case a service that does not answer its liveness check within a second is
 * killed and a new one started on a fresh database, and the case that froze it has failed already.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as yauzl from 'yauzl';
import { makeZip } from '../support/zip-fixtures';
import { parseXml, REST } from '../support/rest-client';
import { spawnService, ServiceProcess } from '../support/service-process';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  sleep,
  TestDatabase,
  testEnvironment,
} from '../support/test-service';

const webR = process.env.R_ENGINE === 'webr';

function onPath(command: string): boolean {
  return (process.env.PATH ?? '').split(':').some((dir) => dir && existsSync(join(dir, command)));
}

/**
 * Native R in bubblewrap against a PostgreSQL server (the database URL must carry a password).
 * Outside CI a machine without bwrap, R or a server skips the file; in CI it must run.
 */
const runs =
  !webR && SERVER_DATABASE_URL !== null && ((onPath('bwrap') && onPath('R')) || !!process.env.CI);

/** A job's own time limit: every attack ends within it (or its retry's); the output flood needs some 5-10 s of a loaded 2-core machine. */
const JOB_TIMEOUT_SECONDS = 60;
/** Attempts of a job: 2, so that a job the service wrongly retries shows attempts="2". */
const MAX_ATTEMPTS = 2;
/** The longest an attacking job may take to end: both attempts at their limit, and slack. */
const END_DEADLINE_MS = (JOB_TIMEOUT_SECONDS * MAX_ATTEMPTS + 5) * 1000;
/** The liveness and deep health checks must answer within this while a job runs and after. */
const HEALTH_ANSWER_MS = 1000;
/** Failed liveness probes in a row after which the service counts as frozen. */
const FROZEN_AFTER_PROBES = 4;
/** The service's write limit, above the output flood so that the flood runs to its end. */
const WRITE_LIMIT_MB = 600;
/** How much the service's resident memory may grow across one output flood. */
const RSS_GROWTH_LIMIT_BYTES = 64 * 1024 * 1024;

/** An R string literal (JSON's escapes are R's for the paths used here). */
function r(text: string): string {
  return JSON.stringify(text);
}

/** A file of a result ZIP, its name as raw bytes (a job may write a name that is not UTF-8). */
interface ResultEntry {
  name: string;
  rawName: Buffer;
  content: Buffer;
}

async function readZip(data: Buffer): Promise<ResultEntry[]> {
  const zipfile = await new Promise<yauzl.ZipFile>((resolve, reject) =>
    yauzl.fromBuffer(data, { lazyEntries: true, decodeStrings: false }, (error, zip) =>
      error ? reject(error) : resolve(zip),
    ),
  );
  const entries: ResultEntry[] = [];
  await new Promise<void>((resolve, reject) => {
    zipfile.on('error', reject);
    zipfile.on('end', () => resolve());
    zipfile.on('entry', (entry: yauzl.Entry) => {
      const rawName = entry.fileName as unknown as Buffer;
      zipfile.openReadStream(entry, (error, stream) => {
        if (error) {
          reject(error);
          return;
        }
        const chunks: Buffer[] = [];
        stream.on('data', (chunk: Buffer) => chunks.push(chunk));
        stream.on('error', reject);
        stream.on('end', () => {
          entries.push({ name: rawName.toString('utf8'), rawName, content: Buffer.concat(chunks) });
          zipfile.readEntry();
        });
      });
    });
    zipfile.readEntry();
  });
  return entries;
}

/** One HTTP request bounded in time: the answer, or the reason there was none. */
async function ask(
  url: string,
  timeoutMs: number,
  init: RequestInit = {},
): Promise<{ status: number; body: Buffer; text: string } | { failed: string }> {
  try {
    const response = await fetch(url, {
      redirect: 'manual',
      ...init,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const body = Buffer.from(await response.arrayBuffer());
    return { status: response.status, body, text: body.toString('utf8') };
  } catch (error) {
    const name = (error as Error).name;
    return {
      failed:
        name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : (error as Error).message,
    };
  }
}

/**
 * Removes a tree as root, whatever a job left in it: GNU rm walks by descriptor, so a tree deeper
 * than PATH_MAX goes too (Node's rm fails on it with ENAMETOOLONG).
 */
function removeTree(path: string): void {
  execFileSync('rm', ['-rf', '--one-file-system', path]);
}

/** The resident memory of a process, in bytes (VmRSS of /proc/<pid>/status). */
function residentBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? NaN) * 1024;
}

/** What the canary directory holds: its mode and owner, and every entry with its bytes. */
function canarySnapshot(dir: string): string {
  if (!existsSync(dir)) {
    return 'missing';
  }
  const stat = statSync(dir);
  const entries = readdirSync(dir)
    .sort()
    .map((name) => `${name}=${readFileSync(join(dir, name), 'utf8')}`);
  return `mode=${(stat.mode & 0o7777).toString(8)} uid=${stat.uid} ${entries.join(';')}`;
}

/** A running service with its own database and temporary directory (svc-jobs lives there). */
interface Node {
  service: ServiceProcess;
  database: TestDatabase;
  tmp: string;
  /** The service's job directories (os.tmpdir()/svc-jobs of the service). */
  jobsRoot: string;
}

interface CaseAnswers {
  jobId: string;
  success?: string;
  type?: string;
  data?: Buffer;
  entries: ResultEntry[];
  attempts?: string;
  log?: string;
}

(runs ? describe : describe.skip).each(['fork', 'spawn'] as const)(
  'a job cannot turn what it wrote against the service (%s mode; native R in bubblewrap)',
  (mode) => {
    const databasePassword = `db-secret-${randomBytes(8).toString('hex')}`;
    const adminPassword = `admin-secret-${randomBytes(8).toString('hex')}`;
    /**
     * The canary's text and a variable of the service's environment both contain "cannot fork":
     * the service looks for it in out.log to name the process limit, so a result that names the
     * limit for a job that forked nothing shows that the service read a planted link's target.
     */
    const canarySecret = `canary-secret-${randomBytes(8).toString('hex')} cannot fork`;
    const environmentMarker = `env-secret-${randomBytes(8).toString('hex')} cannot fork`;
    const secrets: Array<[string, string]> = [
      ['the database password', databasePassword],
      ['the admin password', adminPassword],
      ['the canary text', canarySecret.split(' ')[0]],
      ["the service's environment marker", environmentMarker.split(' ')[0]],
    ];
    let canaryDir: string;
    let canaryFile: string;
    let canaryBefore: string;
    let node: Node | undefined;
    /** Services replaced because a case froze, stuck or damaged them, and why. */
    const restarts: string[] = [];
    /**
     * The last job did not end (or the service froze): its slot is held for good, every later
     * job would wait behind it, so the next job gets a new service.
     */
    let wedged: string | null = null;
    /** Cases after which the canary had changed (it is put back for the next case). */
    const canaryReached: string[] = [];

    function makeCanary(): void {
      mkdirSync(canaryDir, { recursive: true, mode: 0o700 });
      chmodSync(canaryDir, 0o700);
      writeFileSync(canaryFile, canarySecret);
    }

    async function startNode(): Promise<Node> {
      const database = await createTestDatabase();
      const url = new URL(database.url ?? '');
      // PostgreSQL trusts local connections here: the password is a secret string in the env.
      url.password = databasePassword;
      const tmp = mkdtempSync(join(tmpdir(), 'svc-hostile-output-'));
      chmodSync(tmp, 0o755);
      const service = await spawnService({
        ...testEnvironment(database, {
          DATABASE_URL: url.toString(),
          TMPDIR: tmp,
          AUTH_MODE: 'none',
          ADMIN_USER: 'admin',
          ADMIN_PASSWORD: adminPassword,
          HOSTILE_OUTPUT_MARKER: environmentMarker,
          R_ENGINE: 'native',
          R_SANDBOX: 'bwrap',
          R_SCRIPT_MODE: mode,
          SCRIPT_SLOTS: '1',
          FUNCTION_SESSIONS: '1',
          JOB_TIMEOUT_SECONDS: String(JOB_TIMEOUT_SECONDS),
          MAX_ATTEMPTS: String(MAX_ATTEMPTS),
          RETRY_BACKOFF_MS: '200',
          R_MAX_PROCESSES: '512',
          R_MAX_WRITE_MB: String(WRITE_LIMIT_MB),
          R_MAX_FILE_MB: String(WRITE_LIMIT_MB),
        }),
        LOG_LEVEL: 'warn',
      });
      return { service, database, tmp, jobsRoot: join(tmp, 'svc-jobs') };
    }

    async function stopNode(stopping: Node): Promise<void> {
      stopping.service.child.kill('SIGTERM');
      const exited = await Promise.race([
        stopping.service.exited().then(() => true),
        sleep(5000).then(() => false),
      ]);
      if (!exited) {
        // A frozen service does not handle SIGTERM; its sandboxes die with it (--die-with-parent).
        stopping.service.child.kill('SIGKILL');
        await stopping.service.exited();
      }
      await stopping.database.drop().catch(() => undefined);
      removeTree(stopping.tmp);
    }

    /** The running service; one that no longer answers is replaced (and the restart recorded). */
    async function liveNode(label: string, problems: string[]): Promise<Node> {
      if (node) {
        const live = await ask(`${node.service.url}${REST}/system/health/live`, HEALTH_ANSWER_MS);
        if (wedged === null && 'status' in live && live.status === 200) {
          return node;
        }
        const restart = `${label}: a new service (${wedged ?? 'the last one froze or died'})`;
        wedged = null;
        restarts.push(restart);
        problems.push(restart);
        const frozen = node;
        node = undefined;
        await stopNode(frozen);
      }
      node = await startNode();
      return node;
    }

    beforeAll(async () => {
      canaryDir = mkdtempSync('/tmp/svc-canary-');
      canaryFile = join(canaryDir, 'secret.txt');
      makeCanary();
      canaryBefore = canarySnapshot(canaryDir);
      node = await startNode();
    }, 90000);

    afterAll(async () => {
      if (node) {
        await stopNode(node);
      }
      removeTree(canaryDir);
      if (restarts.length > 0) {
        // Evidence for the report; the cases that froze the service have failed already.
        console.warn(`${mode} mode: ${restarts.join('; ')}`);
      }
    }, 60000);

    async function submit(current: Node, application: string, script: string): Promise<string> {
      const zip = await makeZip([{ name: 'job.R', content: script }]);
      const answer = await ask(`${current.service.url}${REST}/jobs`, 30000, {
        method: 'POST',
        headers: { 'Content-Type': 'application/zip', 'X-SVC-Application-Name': application },
        body: zip,
      });
      if (!('status' in answer) || answer.status !== 202) {
        throw new Error(
          `submitting a job of ${application}: ${'failed' in answer ? answer.failed : `${answer.status} ${answer.text}`}`,
        );
      }
      return parseXml(answer.text).jobToken.resultUri;
    }

    /** Every secret found in a text or bytes, as "<where> carries <secret>". */
    function leaksIn(where: string, content: string | Buffer | undefined): string[] {
      if (content === undefined) {
        return [];
      }
      return secrets
        .filter(([, secret]) => content.includes(secret))
        .map(([what]) => `${where} carries ${what}`);
    }

    interface RunOptions {
      /** Called every half second or so while the job runs (the flood measures memory). */
      whileRunning?: (current: Node) => void;
    }

    /**
     * Runs one job and waits for its end while probing the liveness check: returns what the
     * service answered about it and adds to `problems` what went wrong (labelled with `label`).
     */
    async function runJob(
      label: string,
      application: string,
      script: string,
      problems: string[],
      options: RunOptions = {},
    ): Promise<CaseAnswers | undefined> {
      const current = await liveNode(label, problems);
      const resultUri = await submit(current, application, script);
      const jobId = resultUri.split('/').pop() ?? '';
      const base = current.service.url;
      const deadline = Date.now() + END_DEADLINE_MS;
      const slowProbes: string[] = [];
      let failedInARow = 0;
      let resultXml: string | undefined;
      for (;;) {
        const live = await ask(`${base}${REST}/system/health/live`, HEALTH_ANSWER_MS);
        if (!('status' in live) || live.status !== 200) {
          slowProbes.push('failed' in live ? live.failed : `status ${live.status}`);
          failedInARow += 1;
        } else {
          failedInARow = 0;
        }
        options.whileRunning?.(current);
        const result = await ask(resultUri, 2000);
        if ('status' in result && result.status === 200) {
          resultXml = result.text;
          break;
        }
        if (failedInARow >= FROZEN_AFTER_PROBES) {
          wedged = `${label} froze the last one`;
          problems.push(
            `${label}: the service froze while the job ran (health/live: ${slowProbes.slice(-1)[0]})`,
          );
          break;
        }
        if (Date.now() > deadline) {
          wedged = `the job of ${label} never ended on the last one`;
          problems.push(`${label}: the job did not end within ${END_DEADLINE_MS / 1000} s`);
          break;
        }
        await sleep(250);
      }
      if (slowProbes.length > 0 && failedInARow < FROZEN_AFTER_PROBES) {
        problems.push(
          `${label}: health/live did not answer 200 within ${HEALTH_ANSWER_MS} ms while the job ran (${slowProbes.length} times: ${slowProbes[0]})`,
        );
      }
      if (resultXml === undefined) {
        return undefined;
      }
      problems.push(...leaksIn(`${label}: the result`, resultXml));
      const answers: CaseAnswers = { jobId, entries: [] };
      const result = parseXml(resultXml).result;
      answers.success = result.success;
      answers.type = result.type;
      const data = await ask(result.dataUri, 30000);
      if ('status' in data) {
        answers.data = data.body;
        problems.push(...leaksIn(`${label}: the result data`, data.body));
        if (result.type === 'zip') {
          try {
            answers.entries = await readZip(data.body);
          } catch (error) {
            problems.push(`${label}: the result ZIP cannot be read: ${(error as Error).message}`);
          }
          for (const entry of answers.entries) {
            problems.push(
              ...leaksIn(`${label}: the result file ${JSON.stringify(entry.name)}`, entry.content),
            );
          }
        }
      } else {
        problems.push(`${label}: the result data: ${data.failed}`);
      }
      const statusUri = resultUri.replace(`${REST}/results/`, `${REST}/jobs/`);
      const status = await ask(statusUri, 10000);
      if ('status' in status) {
        problems.push(...leaksIn(`${label}: the job status`, status.text));
        answers.attempts = parseXml(status.text).jobStatus?.attempts;
      } else {
        problems.push(`${label}: the job status: ${status.failed}`);
      }
      const log = await ask(`${statusUri}/log`, 10000);
      if ('status' in log) {
        answers.log = log.text;
        problems.push(...leaksIn(`${label}: the job's log`, log.text));
      } else {
        problems.push(`${label}: the job's log: ${log.failed}`);
      }
      return answers;
    }

    /** After an attack: health answers, the canary is untouched, a plain job succeeds. */
    async function expectIntactAfter(label: string, problems: string[], plainJobs = 1) {
      if (!node) {
        problems.push(`${label}: no service`);
        return;
      }
      const live = await ask(`${node.service.url}${REST}/system/health/live`, HEALTH_ANSWER_MS);
      if (!('status' in live) || live.status !== 200) {
        problems.push(
          `${label}: health/live after the job: ${'failed' in live ? live.failed : live.status}`,
        );
      }
      const check = await ask(`${node.service.url}${REST}/system/health/check`, 15000);
      if (!('status' in check) || check.status !== 200) {
        problems.push(
          `${label}: health/check after the job: ${'failed' in check ? check.failed : check.status}`,
        );
      }
      const canaryNow = canarySnapshot(canaryDir);
      if (canaryNow !== canaryBefore) {
        problems.push(`${label}: the canary directory changed: ${canaryNow}`);
        canaryReached.push(`${label}: ${canaryNow}`);
        // Put back for the next cases, which would otherwise all report this one's damage.
        removeTree(canaryDir);
        makeCanary();
        // A link the job left in the slot may go on reaching the canary: a new node.
        wedged = `${label} reached the canary on the last one`;
      }
      for (let i = 0; i < plainJobs; i++) {
        await plainJob(`${label}, plain job ${i + 1}`, problems);
      }
    }

    async function plainJob(label: string, problems: string[]): Promise<void> {
      const plain = await runJob(label, 'plain', 'writeLines("plain 42", "plain.txt")', problems);
      if (!plain) {
        return;
      }
      const file = plain.entries.find((entry) => entry.name === 'plain.txt');
      if (plain.success !== 'true' || file?.content.toString('utf8') !== 'plain 42\n') {
        // The node is damaged for good (its slot's R, say): later cases get a new one.
        wedged = `${label} failed on the last one`;
        problems.push(
          `${label}: success=${plain.success}, plain.txt=${JSON.stringify(file?.content.toString('utf8'))}, data: ${plain.data?.toString('utf8').slice(0, 300)}`,
        );
      }
    }

    /** Neutralises R's own error report, so that the service reads the planted file as it is. */
    const KEEP_PLANTED_FILES = `
local({
  base <- baseenv()
  unlockBinding("writeLines", base)
  assign("writeLines", function(...) invisible(NULL), envir = base)
  lockBinding("writeLines", base)
})
`;

    /**
     * R: replaces `name` in the run's private directory (the parent of TMPDIR; in spawn mode
     * tempdir() is R's session directory below TMPDIR) by a link to `target`.
     */
    const PLANT = `
plant <- function(name, target, dir = dirname(Sys.getenv("TMPDIR"))) {
  path <- file.path(dir, name)
  unlink(path)
  file.symlink(target, path)
}
`;

    it('1. links to /proc/self/environ and the canary as error.txt, written.txt and out.log are not followed', async () => {
      const problems: string[] = [];
      const variants: Array<[string, string]> = [
        [
          'error.txt -> /proc/self/environ, written.txt -> canary, stop()',
          `${PLANT}
plant("error.txt", "/proc/self/environ")
plant("written.txt", ${r(canaryFile)})
${KEEP_PLANTED_FILES}
stop("x")`,
        ],
        [
          'error.txt -> canary, written.txt -> /proc/self/environ, stop()',
          `${PLANT}
plant("error.txt", ${r(canaryFile)})
plant("written.txt", "/proc/self/environ")
${KEEP_PLANTED_FILES}
stop("x")`,
        ],
        [
          'error.txt -> /proc/self/environ, quit(status = 1)',
          `${PLANT}
plant("error.txt", "/proc/self/environ")
plant("written.txt", "/proc/self/environ")
${KEEP_PLANTED_FILES}
quit(save = "no", status = 1)`,
        ],
        [
          'out.log -> /proc/self/environ while running, -> canary at the end',
          `cat("started\\n")
invisible(file.remove("out.log"))
invisible(file.symlink("/proc/self/environ", "out.log"))
Sys.sleep(1)
cat("while linked\\n")
Sys.sleep(1)
invisible(file.remove("out.log"))
invisible(file.symlink(${r(canaryFile)}, "out.log"))
base::writeLines("ok", "ok.txt")`,
        ],
        [
          'out.log -> /proc/self/environ at the end, stop()',
          `cat("started\\n")
invisible(file.remove("out.log"))
invisible(file.symlink("/proc/self/environ", "out.log"))
stop("x")`,
        ],
      ];
      for (const [variant, script] of variants) {
        const label = `case 1 (${variant})`;
        const answers = await runJob(label, 'evil', script, problems);
        if (answers && /R_MAX_PROCESSES/.test(answers.data?.toString('utf8') ?? '')) {
          problems.push(
            `${label}: the result names the process limit for a job that forked nothing: the service read the planted link's target ("cannot fork")`,
          );
        }
        await expectIntactAfter(label, problems);
      }
      expect(problems).toEqual([]);
    }, 300000);

    it('2. FIFOs as error.txt, written.txt and out.log do not freeze the service', async () => {
      const problems: string[] = [];
      const variants: Array<[string, string]> = [
        [
          'error.txt and written.txt FIFOs, stop()',
          `p <- dirname(Sys.getenv("TMPDIR"))
for (f in c("error.txt", "written.txt")) {
  unlink(file.path(p, f))
  system(paste("mkfifo", shQuote(file.path(p, f))))
}
${KEEP_PLANTED_FILES}
stop("x")`,
        ],
        [
          'written.txt FIFO, quit(status = 0)',
          `p <- dirname(Sys.getenv("TMPDIR"))
unlink(file.path(p, "written.txt"))
system(paste("mkfifo", shQuote(file.path(p, "written.txt"))))
${KEEP_PLANTED_FILES}
base::writeLines("ok", "ok.txt")
quit(save = "no", status = 0)`,
        ],
        [
          'out.log FIFO, then exit',
          `cat("started\\n")
invisible(file.remove("out.log"))
system("mkfifo out.log")
base::writeLines("ok", "ok.txt")`,
        ],
      ];
      for (const [variant, script] of variants) {
        const label = `case 2 (${variant})`;
        await runJob(label, 'evil', script, problems);
        await expectIntactAfter(label, problems);
      }
      expect(problems).toEqual([]);
    }, 300000);

    it('3. a socket, a device node, hard links and links to the canary, /proc/1/environ and / stay out of the result', async () => {
      const problems: string[] = [];
      const label = 'case 3 (special files in the working directory)';
      const answers = await runJob(
        label,
        'evil',
        `made <- character()
try1 <- function(name, expr) {
  ok <- tryCatch({ force(expr); file.exists(name) || nzchar(Sys.readlink(name)) },
                 error = function(e) FALSE, warning = function(w) FALSE)
  if (isTRUE(ok)) made <<- c(made, name)
}
try1("sock", system("python3 -c \\"import socket; socket.socket(socket.AF_UNIX).bind('sock')\\"", ignore.stderr = TRUE))
try1("null-device", system("mknod null-device c 1 3", ignore.stderr = TRUE))
try1("hard-passwd", file.link("/etc/passwd", "hard-passwd"))
try1("hard-r", file.link(file.path(R.home("bin"), "R"), "hard-r"))
try1("canary-link", file.symlink(${r(canaryFile)}, "canary-link"))
try1("canary-dir-link", file.symlink(${r(canaryDir)}, "canary-dir-link"))
try1("init-environ", file.symlink("/proc/1/environ", "init-environ"))
try1("self-environ", file.symlink("/proc/self/environ", "self-environ"))
try1("root-link", file.symlink("/", "root-link"))
dir.create("sub")
try1("sub/up", file.symlink("..", "sub/up"))
base::writeLines("mine", "ok.txt")
base::writeLines(made, "made.txt")`,
        problems,
      );
      if (answers) {
        if (answers.success !== 'true') {
          problems.push(`${label}: success=${answers.success}: ${answers.data?.toString('utf8')}`);
        }
        // The attack took place: links are always allowed in the working directory.
        const made = answers.entries.find((entry) => entry.name === 'made.txt');
        const madeNames = (made?.content.toString('utf8') ?? '').split('\n');
        if (!madeNames.includes('canary-link') || !madeNames.includes('root-link')) {
          problems.push(
            `${label}: the job could not plant its links (made: ${madeNames.join(', ')})`,
          );
        }
        const names = answers.entries.map((entry) => entry.name);
        const foreign = names.filter((name) => !['ok.txt', 'made.txt'].includes(name));
        if (foreign.length > 0) {
          problems.push(
            `${label}: the result holds entries the job did not write as regular files: ${foreign.slice(0, 20).join(', ')}`,
          );
        }
        for (const entry of answers.entries) {
          if (/root:x:0:0|^PATH=|\0PATH=/.test(entry.content.toString('latin1'))) {
            problems.push(`${label}: the result file ${entry.name} holds host content`);
          }
        }
      }
      await expectIntactAfter(label, problems);
      expect(problems).toEqual([]);
    }, 120000);

    it("4. links in place of the slot's and the run's directories never make the service touch the canary", async () => {
      const problems: string[] = [];
      const attempt = `
done <- character()
try1 <- function(what, expr) {
  outcome <- tryCatch({ force(expr); "ok" }, error = function(e) conditionMessage(e),
                      warning = function(w) conditionMessage(w))
  done <<- c(done, paste(what, outcome))
}
swap <- function(path) {
  try1(paste("move", basename(path)), stopifnot(file.rename(path, paste0(path, "-away"))))
  try1(paste("link", basename(path)), stopifnot(file.symlink(${r(canaryDir)}, path)))
}
`;
      const variants: Array<[string, string]> = [
        [
          'the working directory replaced by a link to the canary directory',
          `${attempt}
wd <- getwd()
base::writeLines("x", "mine.txt")
swap(wd)
message(paste(done, collapse = "; "))`,
        ],
        [
          "the slot's server-tmp and private replaced by links to the canary directory",
          `${attempt}
slot <- dirname(getwd())
for (name in c("server-tmp", "private")) swap(file.path(slot, name))
base::writeLines(done, "done.txt")`,
        ],
        [
          "tmp, error.txt and written.txt in TMPDIR's parent replaced by links to the canary",
          `${attempt}
p <- dirname(Sys.getenv("TMPDIR"))
swap(Sys.getenv("TMPDIR"))
for (name in c("error.txt", "written.txt")) {
  unlink(file.path(p, name))
  try1(paste("link", name), stopifnot(file.symlink(${r(canaryFile)}, file.path(p, name))))
}
try1("link canary-dir", stopifnot(file.symlink(${r(canaryDir)}, file.path(p, "canary-dir"))))
base::writeLines(done, "done.txt")`,
        ],
      ];
      for (const [variant, script] of variants) {
        const label = `case 4 (${variant})`;
        await runJob(label, 'evil', script, problems);
        await expectIntactAfter(label, problems, 2);
      }
      expect(problems).toEqual([]);
    }, 300000);

    it('5. a subdirectory swapped for a link to the canary directory while the job ends', async () => {
      const problems: string[] = [];
      const label = 'case 5 (directory swap during the run)';
      const answers = await runJob(
        label,
        'evil',
        `dir.create("sub")
base::writeLines("a", "sub/a.txt")
system(${r(`(while true; do mv sub sub-real 2>/dev/null; ln -sfn ${canaryDir} sub; rm -f sub; mv sub-real sub 2>/dev/null; done) > /dev/null 2>&1 &`)})
Sys.sleep(1)
base::writeLines("done", "done.txt")`,
        problems,
      );
      if (answers && !answers.entries.some((entry) => entry.name === 'done.txt')) {
        problems.push(`${label}: the job did not get to its end (success=${answers.success})`);
      }
      const foreign = (answers?.entries ?? [])
        .map((entry) => entry.name)
        .filter((name) => !['done.txt', 'sub/a.txt', 'sub-real/a.txt'].includes(name));
      if (foreign.length > 0) {
        problems.push(
          `${label}: the result holds entries the job did not write: ${foreign.join(', ')}`,
        );
      }
      await expectIntactAfter(label, problems, 2);
      expect(problems).toEqual([]);
    }, 180000);

    it('6. processes left for the sweep to kill do not use up the next jobs of the slot', async () => {
      const problems: string[] = [];
      // Alive when the job ends: the fork server's sweep kills and then waits for each of them.
      const leak = `for (i in 1:150) system("sleep 3 &")
base::writeLines("left", "left.txt")`;
      for (let i = 1; i <= 2; i++) {
        const label = `case 6 (150 background processes left behind, run ${i})`;
        const answers = await runJob(label, 'evil', leak, problems);
        if (answers && answers.success !== 'true') {
          problems.push(`${label}: success=${answers.success}: ${answers.data?.toString('utf8')}`);
        }
      }
      await expectIntactAfter('case 6 (after 300 processes were swept)', problems, 2);
      expect(problems).toEqual([]);
    }, 240000);

    it("7. SysV shared memory, the keyring and the parent's /proc/<pid>/mem are not shared with the next job", async () => {
      const problems: string[] = [];
      const label = 'case 7 (shm, keyring, /proc/<ppid>/mem)';
      const attacker = await runJob(
        label,
        'evil',
        `shm <- suppressWarnings(system("ipcmk -M 1048576 2>&1", intern = TRUE))
key <- if (nzchar(Sys.which("keyctl"))) suppressWarnings(system("keyctl add user svc-hostile marker @u 2>&1", intern = TRUE)) else "no keyctl"
mem <- tryCatch({
  con <- file(sprintf("/proc/%d/mem", Sys.getppid()), "r+b")
  close(con)
  "opened"
}, error = function(e) paste("refused:", conditionMessage(e)),
   warning = function(w) paste("refused:", conditionMessage(w)))
base::writeLines(c(paste("shm", shm), paste("key", key)), "ipc.txt")
base::writeLines(mem, "mem.txt")`,
        problems,
      );
      const mem = attacker?.entries.find((entry) => entry.name === 'mem.txt');
      if (mem?.content.toString('utf8').startsWith('opened')) {
        problems.push(`${label}: the job opened its parent's /proc/<ppid>/mem for writing`);
      }
      const looker = await runJob(
        `${label}, the plain job that looks`,
        'plain',
        `shm <- tryCatch(readLines("/proc/sysvipc/shm"), error = function(e) character(0))
base::writeLines(shm, "shm.txt")
base::writeLines("plain 42", "plain.txt")`,
        problems,
      );
      if (looker) {
        const segments = (
          looker.entries.find((entry) => entry.name === 'shm.txt')?.content.toString('utf8') ?? ''
        )
          .split('\n')
          .slice(1)
          .filter((line) => line.trim().length > 0);
        if (looker.success !== 'true') {
          problems.push(`${label}: the plain job failed: ${looker.data?.toString('utf8')}`);
        }
        if (segments.length > 0) {
          problems.push(
            `${label}: the next job of another application sees shared memory segments: ${segments.join(' | ')} (attacker: ${attacker?.entries
              .find((entry) => entry.name === 'ipc.txt')
              ?.content.toString('utf8')
              .trim()})`,
          );
        }
      }
      await expectIntactAfter(label, problems);
      expect(problems).toEqual([]);
    }, 180000);

    it('8. a name that is not UTF-8, a path beyond PATH_MAX and 20,000 files end with an error result, not a retry', async () => {
      const problems: string[] = [];
      const variants: Array<[string, string, RegExp]> = [
        [
          'a result file whose name is not UTF-8',
          `system("touch $(printf 'bad\\\\377name')")
base::writeLines("ok", "ok.txt")`,
          /name|UTF-?8|encod/i,
        ],
        [
          'a result file deeper than PATH_MAX',
          `for (i in 1:300) {
  d <- strrep(letters[(i %% 26) + 1], 20)
  dir.create(d)
  setwd(d)
}
base::writeLines("deep", "deep.txt")`,
          /path|too long|deep|PATH_MAX/i,
        ],
        [
          '20,000 result files',
          `invisible(file.create(sprintf("f%05d.txt", 1:20000)))`,
          /files|entries|too many/i,
        ],
      ];
      for (const [variant, script, named] of variants) {
        const label = `case 8 (${variant})`;
        const answers = await runJob(label, 'evil', script, problems);
        if (answers) {
          const text = answers.type === 'txt' ? (answers.data?.toString('utf8') ?? '') : '';
          if (answers.success !== 'false' || !named.test(text)) {
            problems.push(
              `${label}: expected an error result naming the problem (${String(named)}), got success=${answers.success} type=${answers.type}: ${text.slice(0, 300)}`,
            );
          }
          if (answers.attempts !== '1') {
            problems.push(`${label}: the job was retried (attempts=${answers.attempts})`);
          }
        }
        const current = node;
        const left = current && existsSync(current.jobsRoot) ? readdirSync(current.jobsRoot) : [];
        if (left.length > 0) {
          problems.push(`${label}: job directories left in svc-jobs: ${left.join(', ')}`);
          // The next variant's check must see only its own leftovers.
          for (const entry of left) {
            removeTree(join(current?.jobsRoot ?? '', entry));
          }
        }
        await expectIntactAfter(label, problems);
      }
      expect(problems).toEqual([]);
    }, 360000);

    it('9. output floods leave the service with its memory, and bytes sent to /dev/null are not bytes written', async () => {
      const problems: string[] = [];
      const settledResident = async (pid: number): Promise<number> => {
        const samples: number[] = [];
        for (let i = 0; i < 5; i++) {
          await sleep(300);
          samples.push(residentBytes(pid));
        }
        return Math.min(...samples);
      };
      const floods: Array<[string, string]> = [
        [
          '500 MB of lines',
          `x <- rep(strrep("x", 999), 1000)
for (i in 1:500) writeLines(x)
base::writeLines("ok", "ok.txt")`,
        ],
        [
          '64 MB without a newline',
          `x <- strrep("y", 1024 * 1024)
for (i in 1:64) cat(x)
base::writeLines("ok", "ok.txt")`,
        ],
      ];
      for (const [variant, script] of floods) {
        const label = `case 9 (${variant})`;
        const current = await liveNode(label, problems);
        const pid = current.service.child.pid ?? 0;
        const before = await settledResident(pid);
        let peak = before;
        const answers = await runJob(label, 'evil', script, problems, {
          whileRunning: () => {
            peak = Math.max(peak, residentBytes(pid));
          },
        });
        if (answers && answers.success !== 'true') {
          problems.push(
            `${label}: success=${answers.success}: ${answers.data?.toString('utf8').slice(0, 300)}`,
          );
        }
        if (node === current) {
          const after = await settledResident(pid);
          const mib = (bytes: number): string => `${Math.round(bytes / 1024 / 1024)} MiB`;
          if (after - before > RSS_GROWTH_LIMIT_BYTES) {
            problems.push(
              `${label}: the service's resident memory grew from ${mib(before)} to ${mib(after)} (peak ${mib(peak)})`,
            );
          }
        }
        await expectIntactAfter(label, problems);
      }
      const label = `case 9 (${WRITE_LIMIT_MB + 100} MB to /dev/null under R_MAX_WRITE_MB=${WRITE_LIMIT_MB})`;
      const nulled = await runJob(
        label,
        'evil',
        `con <- file("/dev/null", "wb")
chunk <- raw(1024 * 1024)
for (i in 1:${WRITE_LIMIT_MB + 100}) writeBin(chunk, con)
close(con)
base::writeLines("ok", "ok.txt")`,
        problems,
      );
      if (nulled && nulled.success !== 'true') {
        problems.push(
          `${label}: success=${nulled.success}: ${nulled.data?.toString('utf8').slice(0, 300)}`,
        );
      }
      await expectIntactAfter(label, problems);
      expect(problems).toEqual([]);
    }, 360000);

    it('no case of the corpus reached the canary directory, and it is there unchanged', () => {
      expect(canaryReached).toEqual([]);
      expect(canarySnapshot(canaryDir)).toBe(canaryBefore);
    });
  },
);
