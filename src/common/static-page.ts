import { readFileSync } from 'node:fs';
import type { Response } from 'express';

/**
 * The service's own browser pages (the upload page, the API page): every file comes from the
 * service itself, no inline script or style, no other origin. So a page works offline, and a
 * script injected into it cannot run or send data anywhere else. blob: images and frames are the
 * upload page's result preview, made by the page from the result ZIP it downloaded.
 */
export const PAGE_CONTENT_SECURITY_POLICY =
  "default-src 'self'; img-src 'self' data: blob:; frame-src blob:; frame-ancestors 'none'; " +
  "form-action 'self'";

export interface StaticFile {
  /** Content-Type, with charset for text. */
  type: string;
  body: Buffer;
}

export function loadStaticFile(path: string, type: string): StaticFile {
  return { type, body: readFileSync(path) };
}

/** Answers a page's file under the pages' Content-Security-Policy; Accept does not apply. */
export function sendStaticFile(res: Response, file: StaticFile): void {
  res
    .status(200)
    .setHeader('Content-Type', file.type)
    .setHeader('Cache-Control', 'no-cache')
    .setHeader('X-Content-Type-Options', 'nosniff')
    .setHeader('Content-Security-Policy', PAGE_CONTENT_SECURITY_POLICY)
    .send(file.body);
}
