import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { rowsOf } from '../storage/query-rows';
import { ResultEntity } from './result.entity';

export type ResultMetadata = Pick<
  ResultEntity,
  'jobId' | 'applicationName' | 'resultTime' | 'success' | 'type'
>;

const METADATA_COLUMNS = {
  jobId: true,
  applicationName: true,
  resultTime: true,
  success: true,
  type: true,
} as const;

@Injectable()
export class ResultRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  async findMetadata(applicationName: string, jobId: string): Promise<ResultMetadata | null> {
    return this.dataSource
      .getRepository(ResultEntity)
      .findOne({ where: { jobId, applicationName }, select: METADATA_COLUMNS });
  }

  async findWithData(applicationName: string, jobId: string): Promise<ResultEntity | null> {
    return this.dataSource
      .getRepository(ResultEntity)
      .findOne({ where: { jobId, applicationName } });
  }

  /** Deletes the result and its job together; false when there was no result. */
  async delete(applicationName: string, jobId: string): Promise<boolean> {
    const raw: unknown = await this.dataSource.query(
      `DELETE FROM job USING result
        WHERE job.id = result.job_id AND job.id = $1 AND job.application_name = $2
        RETURNING job.id`,
      [jobId, applicationName],
    );
    return rowsOf(raw).length > 0;
  }

  /** One page of an application's results, newest first, after the keyset `after` (exclusive). */
  async page(
    applicationName: string,
    size: number,
    after: { resultTime: Date; jobId: string } | null,
    offset = 0,
  ): Promise<ResultMetadata[]> {
    const query = this.dataSource
      .getRepository(ResultEntity)
      .createQueryBuilder('r')
      .select(['r.jobId', 'r.applicationName', 'r.resultTime', 'r.success', 'r.type'])
      .where('r.application_name = :applicationName', { applicationName })
      .orderBy('r.result_time', 'DESC')
      .addOrderBy('r.job_id', 'DESC')
      .limit(size)
      .offset(offset);
    if (after) {
      query.andWhere('(r.result_time, r.job_id) < (:time, :jobId)', {
        time: after.resultTime,
        jobId: after.jobId,
      });
    }
    return query.getMany();
  }
}
