import { Version, VersioningOptions, VersioningType } from '@nestjs/common';
import type { Request } from 'express';

const EVENT_STREAM = 'text/event-stream';

/** The request's Accept names text/event-stream. */
export function acceptsEventStream(req: Pick<Request, 'headers'>): boolean {
  return (req.headers.accept ?? '').toLowerCase().includes(EVENT_STREAM);
}

/**
 * Two handlers on one path, chosen by Accept: a handler returning an EventStream marked `@EventStreamRoute()`
 * answers the requests that accept text/event-stream, the path's next handler the others.
 *
 * Nest's router picks a handler by method and path only; its one filter on anything else is
 * versioning. So the HTTP application turns on custom versioning with this option (bootstrap),
 * and the "version" of a request is the event stream when it accepts one: Express tries the
 * path's handlers in order, and a marked handler passes a request without that version on to
 * the next one. Unmarked routes have no version and no filter: every other route is as before.
 */
export const MEDIA_TYPE_ROUTES: VersioningOptions = {
  type: VersioningType.CUSTOM,
  extractor: (req) => (acceptsEventStream(req as Request) ? [EVENT_STREAM] : []),
};

/** Marks the event stream's handler of a path whose other handler answers without an event stream. */
export const EventStreamRoute = (): MethodDecorator => Version(EVENT_STREAM);
