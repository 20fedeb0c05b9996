import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { QueueRepository } from '../queue/queue.repository';
import { JobEntity, JobKind } from './job.entity';
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

  /** Stores the job, its files and the wake-up notification atomically: all or nothing. */
  async insert(job: NewJob): Promise<void> {
    await this.queue.enqueue(job);
  }

  async findOne(applicationName: string, jobId: string): Promise<JobEntity | null> {
    return this.dataSource
      .getRepository(JobEntity)
      .findOne({ where: { id: jobId, applicationName } });
  }
}
