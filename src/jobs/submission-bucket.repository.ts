import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { rowsOf } from '../storage/query-rows';

/** A token bucket: `perMinute` tokens at most, refilled at perMinute / 60 per second. */
export interface RateBucket {
  key: string;
  perMinute: number;
}

/** The bucket that refused a submission, and the seconds until it has a token again. */
export interface RateRefusal {
  key: string;
  retryAfterSeconds: number;
}

/**
 * Refills and takes from the submission token buckets (table submission_bucket), shared by every
 * API node, in ONE statement: the narrower bucket (a caller's) first, the wider (the
 * application's) only when the narrower granted, so that a caller over its own rate takes
 * nothing from the application's. A refill is computed from the row as locked by the upsert,
 * so two nodes taking at once each see the other's take.
 */
@Injectable()
export class SubmissionBucketRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** Takes a token; on `transaction` when given (a schedule's run: no second connection). */
  async take(
    narrow: RateBucket | null,
    wide: RateBucket | null,
    transaction?: EntityManager,
  ): Promise<RateRefusal | null> {
    const refill = (rate: string): string =>
      `least(${rate}::float8, b.tokens + extract(epoch FROM now() - b.refilled_at) * ${rate}::float8 / 60.0)`;
    const upsert = (key: string, rate: string, condition: string): string =>
      `INSERT INTO submission_bucket AS b (bucket, tokens, refilled_at, granted)
         SELECT ${key}, ${rate}::float8 - 1, now(), true WHERE ${key}::varchar IS NOT NULL AND ${condition}
         ON CONFLICT (bucket) DO UPDATE
            SET granted = ${refill(rate)} >= 1,
                tokens = ${refill(rate)} - CASE WHEN ${refill(rate)} >= 1 THEN 1 ELSE 0 END,
                refilled_at = now()
         RETURNING granted, tokens`;
    const raw: unknown = await (transaction ?? this.dataSource).query(
      `WITH narrow AS (${upsert('$1', '$2', 'true')}),
       wide AS (${upsert('$3', '$4', 'coalesce((SELECT granted FROM narrow), true)')})
       SELECT (SELECT granted FROM narrow) AS narrow_granted, (SELECT tokens FROM narrow) AS narrow_tokens,
              (SELECT granted FROM wide) AS wide_granted, (SELECT tokens FROM wide) AS wide_tokens`,
      [narrow?.key ?? null, narrow?.perMinute ?? 1, wide?.key ?? null, wide?.perMinute ?? 1],
    );
    const row = rowsOf<{
      narrow_granted: boolean | null;
      narrow_tokens: number | null;
      wide_granted: boolean | null;
      wide_tokens: number | null;
    }>(raw)[0];
    const refusal = (bucket: RateBucket, tokens: number | null): RateRefusal => ({
      key: bucket.key,
      // Seconds until one whole token has been refilled.
      retryAfterSeconds: Math.max(1, Math.ceil(((1 - (tokens ?? 0)) * 60) / bucket.perMinute)),
    });
    if (narrow && row.narrow_granted === false) {
      return refusal(narrow, row.narrow_tokens);
    }
    if (wide && row.wide_granted === false) {
      return refusal(wide, row.wide_tokens);
    }
    return null;
  }
}
