import { StreamableFile } from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import type { Response } from 'express';
import { Readable } from 'node:stream';
import { EventStream } from './event-stream';
import { HttpAnswer } from './http-answer';

/**
 * The Express adapter svc's HTTP server runs on: it applies a handler's HttpAnswer (status,
 * headers) and then replies with its body as Nest does with any returned value, except that
 * bytes (a Buffer or a Readable) are sent as they are: Nest would send a Buffer as JSON.
 * An EventStream is written to the response event by event, as its reader takes them.
 * Applied here rather than by an interceptor, because an interceptor costs every request it
 * wraps (rxjs and async-context binds, docs/performance.md). /process, the hottest route, writes
 * its answer itself: through this path it cost 0.4-0.5 ms more CPU per call.
 */
export class HttpAnswerAdapter extends ExpressAdapter {
  override reply(response: Response, body: unknown, statusCode?: number): unknown {
    if (body instanceof EventStream) {
      // Written as its reader takes it (EventStream), not piped by Nest.
      body.writeTo(response, response.req.method);
      return undefined;
    }
    if (!(body instanceof HttpAnswer)) {
      return super.reply(response, body, statusCode);
    }
    for (const [name, value] of Object.entries(body.headers)) {
      if (name.toLowerCase() === 'vary') {
        response.vary(value); // appended: CORS adds Origin
      } else {
        response.setHeader(name, value);
      }
    }
    const status = body.status ?? statusCode;
    if (Buffer.isBuffer(body.body)) {
      // Express's send: Content-Length, a weak ETag and 304 for If-None-Match, as for strings.
      if (status !== undefined) {
        response.status(status);
      }
      return response.send(body.body);
    }
    // A StreamableFile is piped by Nest, and cut should the stream fail midway.
    const content = body.body instanceof Readable ? new StreamableFile(body.body) : body.body;
    return super.reply(response, content, status);
  }
}
