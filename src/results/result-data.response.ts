import { pipeline } from 'node:stream/promises';
import type { Request, Response } from 'express';
import parseRange from 'range-parser';
import type { ResultDataSource } from './result.repository';

/**
 * Sends result bytes with a strong ETag (the SHA-256), conditional GET (304) and single byte
 * ranges (206; a multi-range request gets the whole body, which RFC 9110 allows). The bytes are
 * streamed from the database as the client reads them; HEAD and 304 read none.
 */
export async function sendResultData(
  req: Request,
  res: Response,
  result: ResultDataSource,
): Promise<void> {
  const etag = `"${result.sha256}"`;
  const size = result.size;
  res.setHeader('ETag', etag);
  res.setHeader('Accept-Ranges', 'bytes');
  res.setHeader('Cache-Control', 'private, no-cache');
  res.setHeader('Content-Type', result.contentType);
  res.setHeader('Content-Disposition', `attachment; filename="${result.jobId}.${result.type}"`);
  const ifNoneMatch = req.headers['if-none-match'];
  if (
    ifNoneMatch &&
    (ifNoneMatch.trim() === '*' ||
      ifNoneMatch.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag))
  ) {
    res.status(304).end();
    return;
  }
  let range: { start: number; end: number } | undefined;
  const rangeHeader = req.headers.range;
  const ifRange = req.get('if-range');
  if (rangeHeader && (!ifRange || ifRange.trim() === etag)) {
    const ranges = parseRange(size, rangeHeader, { combine: true });
    if (ranges === -1) {
      res.status(416).setHeader('Content-Range', `bytes */${size}`);
      res.end();
      return;
    }
    if (ranges !== -2 && ranges.type === 'bytes' && ranges.length === 1) {
      range = { start: ranges[0].start, end: ranges[0].end };
    }
  }
  if (range) {
    res.status(206);
    res.setHeader('Content-Range', `bytes ${range.start}-${range.end}/${size}`);
    res.setHeader('Content-Length', String(range.end - range.start + 1));
  } else {
    res.status(200);
    res.setHeader('Content-Length', String(size));
  }
  if (req.method === 'HEAD' || size === 0) {
    res.end();
    return;
  }
  try {
    await pipeline(result.open(range), res);
  } catch {
    // The headers are gone: cutting the connection tells the client the body is incomplete
    // (a deleted result, a lost database, or the client went away).
    res.destroy();
  }
}
