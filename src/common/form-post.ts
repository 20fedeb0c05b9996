import type { Request } from 'express';

const MULTIPART_FORM = /^\s*multipart\/form-data\s*(;|$)/i;

/**
 * A browser form's job submission: a POST with a `multipart/form-data` body (SPEC §6). Such a
 * request names its application in the body, not in a header, and is answered in the plain
 * XML/JSON types a browser can show.
 */
export function isFormPost(req: Pick<Request, 'method' | 'headers'>): boolean {
  return req.method === 'POST' && MULTIPART_FORM.test(req.headers['content-type'] ?? '');
}
