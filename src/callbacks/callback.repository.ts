import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { CallbackState, JobCallbackEntity } from './job-callback.entity';

/** What jobStatus shows of a job's callback. */
export interface CallbackStatus {
  state: CallbackState;
  attempts: number;
  lastHttpStatus: number | null;
  lastError: string | null;
  lastAttemptTime: Date | null;
  deliveryTime: Date | null;
}

/**
 * What job status shows of a job's callback. The rows are made by the statements that store a
 * job's result (QueueRepository: complete, cancel), so a result and its callback commit
 * together, with the callback job that delivers it; the statements that claim, retry and end
 * that job record its attempts here too, so they are the queue module's.
 */
@Injectable()
export class CallbackRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  async findStatus(jobId: string): Promise<CallbackStatus | null> {
    const row = await this.dataSource.getRepository(JobCallbackEntity).findOne({
      where: { jobId },
    });
    return row
      ? {
          state: row.state,
          attempts: row.attempts,
          lastHttpStatus: row.lastHttpStatus,
          lastError: row.lastError,
          lastAttemptTime: row.lastAttemptAt,
          deliveryTime: row.deliveredAt,
        }
      : null;
  }
}
