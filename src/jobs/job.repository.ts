import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { JobEntity } from '../queue/job.entity';

/**
 * Reads jobs as the API shows them. New jobs are stored by QueueRepository.enqueue, with the
 * queue's other statements.
 */
@Injectable()
export class JobRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  async findOne(applicationName: string, jobId: string): Promise<JobEntity | null> {
    return this.dataSource
      .getRepository(JobEntity)
      .findOne({ where: { id: jobId, applicationName } });
  }
}
