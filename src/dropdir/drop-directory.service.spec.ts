import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { ApiError } from '../common/api-error';
import { loadConfig } from '../config/app-config';
import { configProviders } from '../config/config.module';
import { JobsService } from '../jobs/jobs.service';
import { ResultRepository } from '../results/result.repository';
import { DropDirectoryService } from './drop-directory.service';
import { DropFileRepository, DropRecord, PendingDropResult } from './drop-file.repository';
import { DROP_FOLDERS } from './drop-names';
import type { Submission } from '../jobs/jobs.service';

const POLL_MS = 2000;
const LEASE_SECONDS = 30;
const HEARTBEAT_SECONDS = 10;

/** drop_file in memory: enough to watch what the service records. */
class FakeDrops {
  records = new Map<string, DropRecord>();
  forgotten: string[] = [];
  passes = 0;
  /** Holds passes at their last step (the results query) until released. */
  private hold: Promise<void> | null = null;
  private release = (): void => undefined;

  holdPasses(): void {
    this.hold = new Promise((resolve) => (this.release = resolve));
  }
  releasePasses(): void {
    this.hold = null;
    this.release();
  }

  record(_app: string, claimId: string, _name: string, jobId: string): Promise<DropRecord> {
    const record = this.records.get(claimId) ?? { jobId, submitted: false };
    this.records.set(claimId, record);
    return Promise.resolve(record);
  }
  markSubmitted(_app: string, claimId: string): Promise<void> {
    this.records.get(claimId)!.submitted = true;
    return Promise.resolve();
  }
  forget(_app: string, claimId: string): Promise<void> {
    this.forgotten.push(claimId);
    this.records.delete(claimId);
    return Promise.resolve();
  }
  async pendingResults(): Promise<PendingDropResult[]> {
    this.passes += 1;
    await this.hold;
    return [];
  }
  deleteOlderThan(): Promise<void> {
    return Promise.resolve();
  }
}

/** The intake: remembers each submission; a script that says "refuse" is refused with a 400. */
class FakeJobs {
  submitted: Array<{ path: string; jobId: string }> = [];

  submit(submission: Submission): Promise<void> {
    const path = submission.parts[0]?.path ?? '';
    const jobId = submission.jobId ?? '';
    if (readFileSync(path, 'utf8') === 'refuse') {
      return Promise.reject(ApiError.badRequest('The request body is not a ZIP archive.'));
    }
    this.submitted.push({ path, jobId });
    return Promise.resolve();
  }
}

/** Lets the file system's callbacks run (they are real; only the clock is fake). */
async function settle(): Promise<void> {
  for (let i = 0; i < 200; i++) {
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** Lets real I/O run until `condition` holds; fails if it never does. */
async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 100_000 && !condition(); i++) {
    await new Promise((resolve) => setImmediate(resolve));
  }
  expect(condition()).toBe(true);
}

describe('DropDirectoryService', () => {
  let root: string;
  let drops: FakeDrops;
  let jobs: FakeJobs;
  let context: INestApplicationContext | undefined;
  let service: DropDirectoryService;

  async function start(): Promise<void> {
    const config = loadConfig({
      APPLICATION_SETTINGS: JSON.stringify({ reports: { dropDirectory: root } }),
      DROP_POLL_INTERVAL_MS: String(POLL_MS),
      LEASE_SECONDS: String(LEASE_SECONDS),
      HEARTBEAT_SECONDS: String(HEARTBEAT_SECONDS),
    });
    const module = await Test.createTestingModule({
      providers: [
        DropDirectoryService,
        ...configProviders(config),
        { provide: DropFileRepository, useValue: drops },
        { provide: JobsService, useValue: jobs },
        { provide: ResultRepository, useValue: {} },
      ],
    }).compile();
    context = await module.init();
    service = context.get(DropDirectoryService);
  }

  beforeEach(() => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    jest.setSystemTime(new Date('2026-11-25T12:00:00Z'));
    root = mkdtempSync(join(tmpdir(), 'svc-drop-unit-'));
    drops = new FakeDrops();
    jobs = new FakeJobs();
    context = undefined;
  });

  afterEach(async () => {
    jest.useRealTimers();
    drops.releasePasses();
    await context?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('creates the folders and its own processing folder at start-up', async () => {
    await start();
    expect(readdirSync(root).sort()).toEqual([...DROP_FOLDERS].sort());
    expect(readdirSync(join(root, 'processing'))).toEqual([service.node]);
  });

  it('stops the start-up naming the application and the folder it cannot make', async () => {
    const parent = root;
    const file = join(parent, 'a-file');
    await writeFile(file, '');
    root = join(file, 'drop');
    try {
      await expect(start()).rejects.toThrow(
        `APPLICATION_SETTINGS: "reports": dropDirectory ${root}: cannot create ${join(root, 'inbox')} (`,
      );
    } finally {
      root = parent;
    }
  });

  it('looks again DROP_POLL_INTERVAL_MS after a pass ends, never while one runs', async () => {
    drops.holdPasses();
    await start();
    await jest.advanceTimersByTimeAsync(0);
    await until(() => drops.passes === 1);

    await jest.advanceTimersByTimeAsync(POLL_MS * 10);
    await settle();
    expect(drops.passes).toBe(1);

    drops.releasePasses();
    await settle();
    await jest.advanceTimersByTimeAsync(POLL_MS - 1);
    await settle();
    expect(drops.passes).toBe(1);
    await jest.advanceTimersByTimeAsync(1);
    await until(() => drops.passes === 2);
  });

  it('touches its processing folder every HEARTBEAT_SECONDS, even while a pass is stuck', async () => {
    drops.holdPasses();
    await start();
    const own = join(root, 'processing', service.node);
    const started = Date.now();
    await jest.advanceTimersByTimeAsync(0);
    await until(() => drops.passes === 1 && statSync(own).mtimeMs === started);
    await jest.advanceTimersByTimeAsync(HEARTBEAT_SECONDS * 1000 - 1);
    await settle();
    expect(statSync(own).mtimeMs).toBe(started);
    await jest.advanceTimersByTimeAsync(1);
    await until(() => statSync(own).mtimeMs === started + HEARTBEAT_SECONDS * 1000);
    expect(drops.passes).toBe(1);
  });

  it('makes its processing folder again when another node took it for a dead one', async () => {
    await start();
    const own = join(root, 'processing', service.node);
    rmSync(own, { recursive: true });
    await writeFile(join(root, 'inbox', 'later.zip'), 'zip bytes');
    await service.runPass();
    expect(readdirSync(own)).toEqual([]);
    expect(readdirSync(join(root, 'accepted'))).toEqual(['later.zip']);
  });

  it('takes over the claims of a node silent for LEASE_SECONDS, and not before', async () => {
    await start();
    const dead = join(root, 'processing', 'dead-node');
    mkdirSync(dead);
    await writeFile(join(dead, '00000000000000c3.sales.zip'), 'zip bytes');
    const touched = new Date(Date.now() - (LEASE_SECONDS - 5) * 1000);
    await utimes(dead, touched, touched);

    await service.runPass();
    expect(jobs.submitted).toEqual([]);
    expect(readdirSync(dead)).toEqual(['00000000000000c3.sales.zip']);

    jest.setSystemTime(Date.now() + 5000);
    await service.runPass();
    const { jobId } = drops.records.get('00000000000000c3')!;
    expect(jobs.submitted.map((s) => s.jobId)).toEqual([jobId]);
    expect(readdirSync(join(root, 'accepted'))).toEqual(['sales.zip']);
    expect(readdirSync(join(root, 'processing'))).toEqual([service.node]);
  });

  it('submits a claim that was recorded but not stored under the recorded job id', async () => {
    await start();
    drops.records.set('00000000000000d4', { jobId: 'recorded-id', submitted: false });
    const own = join(root, 'processing', service.node);
    await writeFile(join(own, '00000000000000d4.q3.zip'), 'zip bytes');
    drops.records.set('00000000000000e5', { jobId: 'stored-id', submitted: true });
    await writeFile(join(own, '00000000000000e5.q4.zip'), 'zip bytes');

    await service.runPass();
    expect(jobs.submitted.map((s) => s.jobId)).toEqual(['recorded-id']);
    expect(readdirSync(join(root, 'accepted')).sort()).toEqual(['q3.zip', 'q4.zip']);
  });

  it('moves a refused file to rejected/ with the reason, and forgets its record', async () => {
    await start();
    await writeFile(join(root, 'inbox', 'odd.zip'), 'refuse');
    await writeFile(join(root, 'inbox', 'odd.zip.part'), 'still coming');

    await service.runPass();
    expect(readdirSync(join(root, 'rejected')).sort()).toEqual(['odd.zip', 'odd.zip.error.txt']);
    expect(readFileSync(join(root, 'rejected', 'odd.zip.error.txt'), 'utf8')).toBe(
      'The request body is not a ZIP archive.\n',
    );
    expect(drops.forgotten).toHaveLength(1);
    expect(drops.records.size).toBe(0);
    expect(readdirSync(join(root, 'inbox'))).toEqual(['odd.zip.part']);
  });
});
