import type { Request, Response } from 'express';
import parseRange from 'range-parser';
import { ResultEntity } from './result.entity';

/**
 * Sends result bytes with a strong ETag (the SHA-256), conditional GET (304) and single byte
 * ranges (206; a multi-range request gets the whole body, which RFC 9110 allows).
 */
export function sendResultData(req: Request, res: Response, result: ResultEntity): void {
  const etag = `"${result.sha256}"`;
  const data = result.data;
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
  const rangeHeader = req.headers.range;
  const ifRange = req.get('if-range');
  if (rangeHeader && (!ifRange || ifRange.trim() === etag)) {
    const ranges = parseRange(data.length, rangeHeader, { combine: true });
    if (ranges === -1) {
      res.status(416).setHeader('Content-Range', `bytes */${data.length}`);
      res.end();
      return;
    }
    if (ranges !== -2 && ranges.type === 'bytes' && ranges.length === 1) {
      const { start, end } = ranges[0];
      res.status(206);
      res.setHeader('Content-Range', `bytes ${start}-${end}/${data.length}`);
      res.setHeader('Content-Length', String(end - start + 1));
      res.end(req.method === 'HEAD' ? undefined : data.subarray(start, end + 1));
      return;
    }
  }
  res.status(200);
  res.setHeader('Content-Length', String(data.length));
  res.end(req.method === 'HEAD' ? undefined : data);
}
