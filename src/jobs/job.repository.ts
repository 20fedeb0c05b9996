import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { QueueRepository } from '../queue/queue.repository';
import { JobFileEntity } from './job-file.entity';
import { JobEntity, JobKind, JobState } from './job.entity';
import { JobFileInput, JobMeta } from './job-input';

export interface NewJob {
  id: string;
  applicationName: string;
  kind: JobKind;
  meta: JobMeta;
  source: string;
  submittedAt: Date;
  files: JobFileInput[];
}

@Injectable()
export class JobRepository {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly queue: QueueRepository,
  ) {}

  /** Stores the job, its files and the wake-up notification in one transaction: all or nothing. */
  async insert(job: NewJob): Promise<void> {
    await this.dataSource.transaction(async (manager) => {
      await manager.insert(JobEntity, {
        id: job.id,
        applicationName: job.applicationName,
        kind: job.kind,
        state: JobState.QUEUED,
        priority: 0,
        meta: job.meta,
        source: job.source,
        submittedAt: job.submittedAt,
        runAfter: job.submittedAt,
        attempts: 0,
      });
      if (job.files.length > 0) {
        await manager.insert(
          JobFileEntity,
          job.files.map((file) => ({
            jobId: job.id,
            name: file.name,
            content: file.content,
            size: String(file.content.length),
          })),
        );
      }
      await this.queue.notifyQueued(manager, job.applicationName);
    });
  }

  async findOne(applicationName: string, jobId: string): Promise<JobEntity | null> {
    return this.dataSource
      .getRepository(JobEntity)
      .findOne({ where: { id: jobId, applicationName } });
  }
}
