import { randomBytes, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import {
  chmod,
  mkdir,
  readdir,
  rename,
  rm,
  rmdir,
  stat,
  utimes,
  writeFile,
} from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  BeforeApplicationShutdown,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnModuleInit,
} from '@nestjs/common';
import { ApiError } from '../common/api-error';
import {
  ApplicationsConfig,
  DropDirectoryConfig,
  IntakeLimitsConfig,
} from '../config/config-slices';
import { applicationSettingsOf } from '../config/application-settings';
import { JobsService } from '../jobs/jobs.service';
import { ResultRepository } from '../results/result.repository';
import { DropFileRepository } from './drop-file.repository';
import { isDuplicateKey } from '../storage/query-rows';
import {
  claimName,
  DROP_FOLDERS,
  droppedKind,
  DropDirectory,
  dropDirectory,
  errorFileName,
  isTemporaryName,
  parseClaimName,
  resultFileName,
} from './drop-names';
import { JobSource } from '../queue/queue.types';

/** drop_file records are kept this long after their result was written (or their claim). */
const RECORD_RETENTION_DAYS = 7;
const CLEANUP_EVERY_MS = 3_600_000;

function isMissing(error: unknown): boolean {
  return (error as NodeJS.ErrnoException).code === 'ENOENT';
}

/** Renames, or does nothing when the file is gone (another node took it): false then. */
async function renameIfPresent(from: string, to: string): Promise<boolean> {
  try {
    await rename(from, to);
    return true;
  } catch (error) {
    if (isMissing(error)) {
      return false;
    }
    throw error;
  }
}

/**
 * Watches the drop directories of APPLICATION_SETTINGS (docs/operations.md#drop-directory): a
 * file renamed into `inbox/` is claimed by an atomic rename into this node's `processing/<node>/`,
 * recorded in drop_file with the job id it will get, submitted through JobsService like a REST
 * ZIP, and moved to `accepted/` (or, refused, to `rejected/` with the reason). Results are
 * written to `outbox/` by whichever watcher sees them first. A node whose `processing/<node>/`
 * was not touched for LEASE_SECONDS is dead: its claims are taken over and finished under their
 * recorded job id, so a file is never submitted twice.
 */
@Injectable()
export class DropDirectoryService
  implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown
{
  private readonly logger = new Logger('DropDirectory');
  /** This node's folder under processing/: unique per process start. */
  readonly node = `${hostname().replace(/[^\w.-]/g, '_')}-${process.pid}-${randomBytes(4).toString('hex')}`;
  readonly directories: DropDirectory[];
  private readonly timers: NodeJS.Timeout[] = [];
  private pass: Promise<void> = Promise.resolve();
  private stopped = false;
  private lastCleanup = 0;

  constructor(
    private readonly config: DropDirectoryConfig,
    private readonly limits: IntakeLimitsConfig,
    applications: ApplicationsConfig,
    private readonly jobs: JobsService,
    private readonly drops: DropFileRepository,
    private readonly results: ResultRepository,
  ) {
    this.directories = Object.keys(applications.applicationSettings)
      .map((app) => ({ app, root: applicationSettingsOf(applications, app).dropDirectory }))
      .filter((entry): entry is { app: string; root: string } => entry.root !== null)
      .map(({ app, root }) => dropDirectory(app, root));
  }

  /** The folders exist before the node starts, or the start-up fails naming the directory. */
  async onModuleInit(): Promise<void> {
    for (const dir of this.directories) {
      for (const folder of [...DROP_FOLDERS.map((f) => dir[f]), this.ownClaims(dir)]) {
        try {
          await mkdir(folder, { recursive: true });
        } catch (error) {
          throw new Error(
            `APPLICATION_SETTINGS: "${dir.applicationName}": dropDirectory ${dir.root}: ` +
              `cannot create ${folder} (${(error as Error).message}); make the directory writable ` +
              "for the service's user, or remove the setting",
          );
        }
      }
    }
  }

  onApplicationBootstrap(): void {
    if (this.directories.length === 0) {
      return;
    }
    this.logger.log(
      `watching ${this.directories.map((d) => `${d.applicationName}: ${d.root}`).join(', ')}`,
    );
    this.timers.push(setInterval(() => void this.heartbeat(), this.config.heartbeatSeconds * 1000));
    // Other modules' start-up may have taken a while since onModuleInit made the folder.
    void this.heartbeat();
    this.schedule(0);
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    this.timers.forEach((timer) => clearTimeout(timer));
    await this.pass;
    // An empty folder goes; claims left in it are taken over by another node after the lease.
    for (const dir of this.directories) {
      await rmdir(this.ownClaims(dir)).catch(() => undefined);
    }
  }

  private schedule(delayMs: number): void {
    const timer = setTimeout(() => {
      this.timers.splice(this.timers.indexOf(timer), 1);
      this.pass = this.runPass().finally(() => {
        if (!this.stopped) {
          this.schedule(this.config.dropPollIntervalMs);
        }
      });
    }, delayMs);
    this.timers.push(timer);
  }

  /**
   * One look at every drop directory: take over the claims of dead nodes, finish this node's
   * claims, claim and submit what is in the inbox, write the results that are ready.
   */
  async runPass(): Promise<void> {
    for (const dir of this.directories) {
      await this.guarded(`drop directory ${dir.root}`, async () => {
        await mkdir(this.ownClaims(dir), { recursive: true });
        await this.takeOverDeadClaims(dir);
        await this.finishClaims(dir);
        await this.claimInbox(dir);
      });
    }
    await this.guarded('writing drop directory results', () => this.writeResults());
    if (Date.now() - this.lastCleanup >= CLEANUP_EVERY_MS) {
      this.lastCleanup = Date.now();
      await this.guarded('drop_file clean-up', () =>
        this.drops.deleteOlderThan(RECORD_RETENTION_DAYS),
      );
    }
  }

  /** A failure is logged and retried on the next pass (the database or a disk may be away). */
  private async guarded(what: string, work: () => Promise<void>): Promise<void> {
    try {
      await work();
    } catch (error) {
      this.logger.warn(`${what}: ${(error as Error).message}; trying again on the next pass`);
    }
  }

  private ownClaims(dir: DropDirectory): string {
    return join(dir.processing, this.node);
  }

  /**
   * Tells other nodes this one lives: the mtime of its processing folder, made again if a node
   * took it for a dead one's (this node was stalled for LEASE_SECONDS) and removed it.
   */
  private async heartbeat(): Promise<void> {
    const now = new Date();
    for (const dir of this.directories) {
      const own = this.ownClaims(dir);
      await mkdir(own, { recursive: true })
        .then(() => utimes(own, now, now))
        .catch((error: Error) => this.logger.warn(`cannot touch ${own}: ${error.message}`));
    }
  }

  /** Moves the claims of nodes silent for LEASE_SECONDS into this node's folder. */
  private async takeOverDeadClaims(dir: DropDirectory): Promise<void> {
    const leaseMs = this.config.leaseSeconds * 1000;
    for (const entry of await readdir(dir.processing, { withFileTypes: true })) {
      if (!entry.isDirectory() || entry.name === this.node) {
        continue;
      }
      const folder = join(dir.processing, entry.name);
      const seen = await stat(folder).catch(() => null);
      if (seen === null || Date.now() - seen.mtimeMs < leaseMs) {
        continue;
      }
      for (const name of await readdir(folder).catch(() => [])) {
        if (await renameIfPresent(join(folder, name), join(this.ownClaims(dir), name))) {
          this.logger.log(`took over ${name} from the silent node ${entry.name}`);
        }
      }
      await rmdir(folder).catch(() => undefined);
    }
  }

  private async finishClaims(dir: DropDirectory): Promise<void> {
    for (const name of await readdir(this.ownClaims(dir))) {
      const claim = parseClaimName(name);
      if (claim !== null) {
        await this.finishClaim(dir, claim.claimId, claim.fileName);
      }
    }
  }

  /** Claims each finished file of the inbox in turn and submits it before claiming the next. */
  private async claimInbox(dir: DropDirectory): Promise<void> {
    for (const entry of await readdir(dir.inbox, { withFileTypes: true })) {
      if (this.stopped) {
        return;
      }
      if (!entry.isFile() || isTemporaryName(entry.name)) {
        continue;
      }
      const claimId = randomBytes(8).toString('hex');
      const claimed = join(this.ownClaims(dir), claimName(claimId, entry.name));
      if (await renameIfPresent(join(dir.inbox, entry.name), claimed)) {
        await this.finishClaim(dir, claimId, entry.name);
      }
    }
  }

  /**
   * Submits a claimed file once (the record's job id makes a repeat find the job) and moves it
   * to accepted/, or to rejected/ with the reason.
   */
  private async finishClaim(dir: DropDirectory, claimId: string, fileName: string): Promise<void> {
    const app = dir.applicationName;
    const path = join(this.ownClaims(dir), claimName(claimId, fileName));
    const record = await this.drops.record(app, claimId, fileName, randomUUID());
    if (!record.submitted) {
      const problem = await this.submit(app, path, fileName, record.jobId);
      if (problem !== null) {
        await this.reject(dir, path, claimId, fileName, problem);
        return;
      }
      await this.drops.markSubmitted(app, claimId);
    }
    if (await renameIfPresent(path, join(dir.accepted, fileName))) {
      this.logger.log(`${fileName} in ${dir.inbox} is job ${record.jobId}`);
    }
  }

  /** Null when the job is stored (now or by an earlier attempt), else why the file is refused. */
  private async submit(
    app: string,
    path: string,
    fileName: string,
    jobId: string,
  ): Promise<string | null> {
    const kind = droppedKind(fileName);
    if (kind === null) {
      return `"${fileName}" is neither a ZIP archive (.zip) nor an R script (.R).`;
    }
    const { size } = await stat(path);
    if (size === 0) {
      return `"${fileName}" is empty.`;
    }
    if (size > this.limits.maxRequestBytes) {
      return `"${fileName}" has ${size} bytes, more than MAX_REQUEST_BYTES (${this.limits.maxRequestBytes}).`;
    }
    try {
      await this.jobs.submit({
        // The service's own: the directory is the admin's to set up.
        caller: { kind: 'service' },
        applicationName: app,
        source: JobSource.DIRECTORY,
        meta: {},
        callback: null,
        parts: [{ name: fileName, label: null, path, zip: kind === 'zip' }],
        jobId,
      });
      return null;
    } catch (error) {
      if (isDuplicateKey(error)) {
        return null; // stored by the node that held the claim before
      }
      if (error instanceof ApiError) {
        return error.message;
      }
      throw error;
    }
  }

  private async reject(
    dir: DropDirectory,
    path: string,
    claimId: string,
    fileName: string,
    problem: string,
  ): Promise<void> {
    // The reason first: a node stopping in between leaves the claim, which is retried whole.
    await this.writeAtomically(join(dir.rejected, errorFileName(fileName)), `${problem}\n`);
    await renameIfPresent(path, join(dir.rejected, fileName));
    await this.drops.forget(dir.applicationName, claimId);
    this.logger.log(`${fileName} in ${dir.inbox} rejected: ${problem}`);
  }

  /** Writes every result that is ready into its outbox; any watcher of the directory may. */
  private async writeResults(): Promise<void> {
    const apps = this.directories.map((d) => d.applicationName);
    for (const pending of await this.drops.pendingResults(apps)) {
      const dir = this.directories.find((d) => d.applicationName === pending.applicationName);
      const source = await this.results.findDataSource(pending.applicationName, pending.jobId);
      if (dir === undefined || source === null) {
        continue;
      }
      const target = join(dir.outbox, resultFileName(pending.fileName, source.type));
      await this.writeAtomically(target, source.open());
      await this.drops.markResultWritten(pending.applicationName, pending.claimId);
    }
  }

  /**
   * Written under a hidden name of this node, then renamed: readers see whole files only. Mode
   * 0644 whatever the umask: the drop directory's permissions are its access rule, so whoever
   * the folder lets in reads the file, and no one but the service's user changes it.
   */
  private async writeAtomically(target: string, data: string | Readable): Promise<void> {
    const dot = target.lastIndexOf('/') + 1;
    const temporary = `${target.slice(0, dot)}.${target.slice(dot)}.${this.node}.part`;
    try {
      if (typeof data === 'string') {
        await writeFile(temporary, data);
      } else {
        await pipeline(data, createWriteStream(temporary));
      }
      await chmod(temporary, 0o644);
      await rename(temporary, target);
    } finally {
      await rm(temporary, { force: true });
    }
  }
}
