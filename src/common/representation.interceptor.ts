import {
  CallHandler,
  ExecutionContext,
  Injectable,
  NestInterceptor,
  UseInterceptors,
} from '@nestjs/common';
import type { Request, Response } from 'express';
import { map, Observable } from 'rxjs';
import { formatOf } from './negotiation';
import { isRestView, renderRepresentation } from './representation/rest-representation';

/** Turns a controller's RestView into vnd+xml or vnd+json, as negotiated. */
@Injectable()
export class RepresentationInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const req = context.switchToHttp().getRequest<Request>();
    const res = context.switchToHttp().getResponse<Response>();
    return next.handle().pipe(
      map((value: unknown) => {
        if (!isRestView(value)) {
          return value;
        }
        const { format, mediaType } = formatOf(req);
        res.setHeader('Content-Type', `${mediaType}; charset=utf-8`);
        res.vary('Accept'); // appended: CORS adds Origin
        return renderRepresentation(value, format);
      }),
    );
  }
}

/**
 * Puts RepresentationInterceptor on a controller whose routes return RestViews. It is
 * not global: an interceptor costs every route it wraps (Nest binds async contexts and builds
 * observables per request), and the routes that answer bytes themselves (/process, metrics, the
 * upload page, the fallback) have nothing for it to render.
 */
export const RendersRepresentations = (): ClassDecorator =>
  UseInterceptors(RepresentationInterceptor);
