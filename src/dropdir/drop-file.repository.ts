import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';

/** A file taken from an inbox, as recorded: the job it becomes and whether that is stored. */
export interface DropRecord {
  jobId: string;
  submitted: boolean;
}

/** A drop whose job has a result that is not yet in the outbox. */
export interface PendingDropResult {
  applicationName: string;
  claimId: string;
  fileName: string;
  jobId: string;
}

/** Every statement about drop_file (see drop-file.entity.ts). */
@Injectable()
export class DropFileRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * Records a claim with the job id it will be submitted under, or finds the record a node that
   * held the claim before made: its job id then wins, so a retry submits under the same id.
   */
  async record(
    applicationName: string,
    claimId: string,
    fileName: string,
    jobId: string,
  ): Promise<DropRecord> {
    await this.dataSource.query(
      `INSERT INTO drop_file (application_name, claim_id, file_name, job_id, claimed_at)
       VALUES ($1, $2, $3, $4, now()) ON CONFLICT DO NOTHING`,
      [applicationName, claimId, fileName, jobId],
    );
    const rows = await this.dataSource.query<Array<{ job_id: string; submitted: boolean }>>(
      `SELECT job_id, submitted_at IS NOT NULL AS submitted
         FROM drop_file WHERE application_name = $1 AND claim_id = $2`,
      [applicationName, claimId],
    );
    return { jobId: rows[0].job_id, submitted: rows[0].submitted };
  }

  async markSubmitted(applicationName: string, claimId: string): Promise<void> {
    await this.dataSource.query(
      `UPDATE drop_file SET submitted_at = now()
        WHERE application_name = $1 AND claim_id = $2 AND submitted_at IS NULL`,
      [applicationName, claimId],
    );
  }

  /** A rejected file made no job: its record goes. */
  async forget(applicationName: string, claimId: string): Promise<void> {
    await this.dataSource.query(
      'DELETE FROM drop_file WHERE application_name = $1 AND claim_id = $2',
      [applicationName, claimId],
    );
  }

  /** Drops of these applications whose job has a result not yet written (drop_file_pending_idx). */
  async pendingResults(applicationNames: string[]): Promise<PendingDropResult[]> {
    const rows = await this.dataSource.query<
      Array<{ application_name: string; claim_id: string; file_name: string; job_id: string }>
    >(
      `SELECT d.application_name, d.claim_id, d.file_name, d.job_id
         FROM drop_file d JOIN result r ON r.job_id = d.job_id
        WHERE d.result_written_at IS NULL AND d.submitted_at IS NOT NULL
          AND d.application_name = ANY($1)
        ORDER BY d.claimed_at`,
      [applicationNames],
    );
    return rows.map((row) => ({
      applicationName: row.application_name,
      claimId: row.claim_id,
      fileName: row.file_name,
      jobId: row.job_id,
    }));
  }

  async markResultWritten(applicationName: string, claimId: string): Promise<void> {
    await this.dataSource.query(
      `UPDATE drop_file SET result_written_at = now()
        WHERE application_name = $1 AND claim_id = $2`,
      [applicationName, claimId],
    );
  }

  /**
   * Records older than `days` (from their result, else their claim) go: by then a claim is long
   * settled (a dead node's claims are taken over after LEASE_SECONDS).
   */
  async deleteOlderThan(days: number): Promise<void> {
    await this.dataSource.query(
      `DELETE FROM drop_file
        WHERE coalesce(result_written_at, claimed_at) < now() - make_interval(days => $1)`,
      [days],
    );
  }
}
