import { readFile, stat } from 'node:fs/promises';
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { JOB_QUEUED_CHANNEL, JobCallbackTarget, QueueRepository } from '../queue/queue.repository';
import {
  BLOB_INLINE_MAX_BYTES,
  filePieces,
  JOB_FILE_CHUNKS,
  writeChunks,
} from '../storage/blob-chunks';
import { rowsOf } from '../storage/query-rows';
import { JobEntity, JobKind } from './job.entity';
import { JobFileContent, JobFileInput, JobFilePath, JobMeta } from './job-input';

export interface NewJob {
  id: string;
  applicationName: string;
  kind: JobKind;
  meta: JobMeta;
  source: string;
  submittedAt: Date;
  files: JobFileInput[];
  /** Where the result is POSTed when the job ends (already validated); null: nowhere. */
  callback?: JobCallbackTarget | null;
}

function isContent(file: JobFileInput): file is JobFileContent {
  return 'content' in file;
}

/** A file on disk small enough to be inline is read here, so that it takes the fast path. */
async function inlineIfSmall(file: JobFileInput): Promise<JobFileInput> {
  if (isContent(file) || (await stat(file.path)).size > BLOB_INLINE_MAX_BYTES) {
    return file;
  }
  return { name: file.name, content: await readFile(file.path) };
}

@Injectable()
export class JobRepository {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly queue: QueueRepository,
  ) {}

  /**
   * Stores the job, its files and the wake-up notification atomically: all or nothing. Files in
   * memory are stored inline; files on disk larger than BLOB_INLINE_MAX_BYTES are streamed into
   * job_file_chunk inside the same transaction (see src/storage/blob-chunks.ts), so a failed
   * upload leaves nothing behind.
   */
  async insert(job: NewJob): Promise<void> {
    const files = await Promise.all(job.files.map(inlineIfSmall));
    if (files.every(isContent)) {
      // The common case: one statement (QueueRepository.enqueue).
      await this.queue.enqueue({ ...job, files });
      return;
    }
    await this.dataSource.transaction(async (manager) => {
      await manager.query(
        `INSERT INTO job (id, application_name, kind, state, priority, meta, source, submitted_at, run_after, attempts,
                          callback_url, callback_links_base)
         VALUES ($1, $2, $3, 'QUEUED', 0, $4, $5, $6, $6, 0, $7, $8)`,
        [
          job.id,
          job.applicationName,
          job.kind,
          JSON.stringify(job.meta),
          job.source,
          job.submittedAt,
          job.callback?.url ?? null,
          job.callback?.linksBase ?? null,
        ],
      );
      for (const file of files) {
        if (isContent(file)) {
          await manager.query(
            `INSERT INTO job_file (job_id, name, content, size) VALUES ($1, $2, $3::bytea, octet_length($3::bytea))`,
            [job.id, file.name, file.content],
          );
        } else {
          await this.insertChunked(manager, job.id, file);
        }
      }
      // Delivered on commit: no worker wakes before the job and all its pieces are visible.
      await manager.query('SELECT pg_notify($1, $2)', [JOB_QUEUED_CHANNEL, job.applicationName]);
    });
  }

  private async insertChunked(manager: EntityManager, jobId: string, file: JobFilePath) {
    const raw: unknown = await manager.query(
      `INSERT INTO job_file (job_id, name, content, size, chunked)
       VALUES ($1, $2, ''::bytea, 0, true) RETURNING id`,
      [jobId, file.name],
    );
    const fileId = rowsOf<{ id: string }>(raw)[0].id;
    const { size } = await writeChunks(manager, JOB_FILE_CHUNKS, fileId, filePieces(file.path));
    await manager.query('UPDATE job_file SET size = $2 WHERE id = $1', [fileId, size]);
  }

  async findOne(applicationName: string, jobId: string): Promise<JobEntity | null> {
    return this.dataSource
      .getRepository(JobEntity)
      .findOne({ where: { id: jobId, applicationName } });
  }
}
