import type { Request } from 'express';

/** The media type of a Content-Type value, lower-case and without its parameters. */
export function mediaType(contentType: string | undefined): string {
  return (contentType ?? '').split(';')[0].trim().toLowerCase();
}

/** The media type of a request's body. */
export function mediaTypeOf(req: Pick<Request, 'headers'>): string {
  return mediaType(req.headers['content-type']);
}
