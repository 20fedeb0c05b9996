/**
 * Large binary data (job files, results) in PostgreSQL without holding it in memory.
 *
 * Data up to BLOB_INLINE_MAX_BYTES stays inline in its row's bytea column (one statement, the
 * fast path). Larger data is cut into BLOB_CHUNK_BYTES pieces in a chunk table keyed by the
 * owner row and a sequence number: a writer inserts one piece at a time inside the transaction
 * that makes the owner row visible, a reader fetches one piece at a time as its consumer asks
 * for more. Every piece but the last is exactly BLOB_CHUNK_BYTES long, so a byte offset maps to
 * a piece by division; the chunk size is therefore part of the storage format.
 */
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/** Data larger than this goes to chunks. */
export const BLOB_INLINE_MAX_BYTES = 1024 * 1024;
/** The size of every piece but the last. Changing it needs a migration of the stored pieces. */
export const BLOB_CHUNK_BYTES = 1024 * 1024;

/** The chunk tables and their owner key. Identifiers cannot be query parameters, so only these. */
export const JOB_FILE_CHUNKS = { table: 'job_file_chunk', owner: 'file_id' } as const;
export const RESULT_CHUNKS = { table: 'result_chunk', owner: 'job_id' } as const;
export type ChunkTable = typeof JOB_FILE_CHUNKS | typeof RESULT_CHUNKS;

/** What runs SQL: a DataSource, or an EntityManager inside a transaction. */
export interface SqlRunner {
  query(sql: string, parameters?: unknown[]): Promise<unknown>;
}

/** An inclusive byte range, as HTTP ranges are. */
export interface ByteRange {
  start: number;
  end: number;
}

export interface WrittenBlob {
  size: number;
  /** Hex SHA-256 of the bytes written. */
  sha256: string;
}

/** Re-cuts a stream of buffers into pieces of exactly `size` bytes (the last may be shorter). */
export async function* cutIntoPieces(
  source: AsyncIterable<Buffer | string> | Iterable<Buffer>,
  size: number,
): AsyncGenerator<Buffer> {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  for await (const item of source) {
    let buffer = typeof item === 'string' ? Buffer.from(item) : item;
    while (buffer.length > 0) {
      const take = Math.min(size - pendingBytes, buffer.length);
      pending.push(take === buffer.length ? buffer : buffer.subarray(0, take));
      pendingBytes += take;
      buffer = buffer.subarray(take);
      if (pendingBytes === size) {
        yield pending.length === 1 ? pending[0] : Buffer.concat(pending, size);
        pending = [];
        pendingBytes = 0;
      }
    }
  }
  if (pendingBytes > 0) {
    yield Buffer.concat(pending, pendingBytes);
  }
}

/**
 * Stores `source` as the pieces of `ownerId` in `chunks`, one INSERT per piece, and returns the
 * size and SHA-256 of what was stored. Run it inside the transaction that inserts the owner row,
 * so that a failure (of the source or the database) leaves no piece behind. The source is read
 * only as fast as the database takes the pieces.
 */
export async function writeChunks(
  db: SqlRunner,
  chunks: ChunkTable,
  ownerId: string,
  source: AsyncIterable<Buffer | string> | Iterable<Buffer>,
): Promise<WrittenBlob> {
  const hash = createHash('sha256');
  let size = 0;
  let seq = 0;
  for await (const piece of cutIntoPieces(source, BLOB_CHUNK_BYTES)) {
    hash.update(piece);
    size += piece.length;
    await db.query(`INSERT INTO ${chunks.table} (${chunks.owner}, seq, data) VALUES ($1, $2, $3)`, [
      ownerId,
      seq,
      piece,
    ]);
    seq += 1;
  }
  return { size, sha256: hash.digest('hex') };
}

/**
 * Streams the bytes `range` (inclusive; the whole data when absent) of `ownerId`'s pieces. One
 * piece is fetched at a time, when the consumer wants more (backpressure), and only the part of
 * a piece that the range covers leaves the database. A missing piece (the data was deleted while
 * it was read) fails the stream.
 */
export function readChunks(
  db: SqlRunner,
  chunks: ChunkTable,
  ownerId: string,
  size: number,
  range?: ByteRange,
): Readable {
  let position = range?.start ?? 0;
  const end = Math.min(range?.end ?? size - 1, size - 1);
  return new Readable({
    highWaterMark: BLOB_CHUNK_BYTES,
    read() {
      if (position > end) {
        this.push(null);
        return;
      }
      const seq = Math.floor(position / BLOB_CHUNK_BYTES);
      const offset = position - seq * BLOB_CHUNK_BYTES;
      const length = Math.min(BLOB_CHUNK_BYTES - offset, end - position + 1);
      db.query(
        // substring on bytea is 1-based.
        `SELECT substring(data FROM $3::int FOR $4::int) AS data FROM ${chunks.table}
          WHERE ${chunks.owner} = $1 AND seq = $2`,
        [ownerId, seq, offset + 1, length],
      ).then(
        (rows) => {
          const piece = (rows as Array<{ data: Buffer }>)[0]?.data;
          if (!piece || piece.length !== length) {
            this.destroy(
              new Error(`piece ${seq} of ${chunks.table} ${ownerId} is missing or short`),
            );
            return;
          }
          position += length;
          this.push(piece);
        },
        (error: Error) => this.destroy(error),
      );
    },
  });
}

/** Writes `ownerId`'s pieces into a new file at `path`, one piece in memory at a time. */
export async function copyChunksToFile(
  db: SqlRunner,
  chunks: ChunkTable,
  ownerId: string,
  size: number,
  path: string,
): Promise<void> {
  await pipeline(
    readChunks(db, chunks, ownerId, size),
    createWriteStream(path, { flags: 'wx', mode: 0o600 }),
  );
}

/** A stream of an inline buffer, or of the bytes `range` of it. */
export function readInline(data: Buffer, range?: ByteRange): Readable {
  const part = range ? data.subarray(range.start, range.end + 1) : data;
  return Readable.from(part.length > 0 ? [part] : [], { objectMode: false });
}
