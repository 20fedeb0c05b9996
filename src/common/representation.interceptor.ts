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
import { renderRepresentation, RestRepresentation } from './representation/rest-representation';

export function isRestRepresentation(value: unknown): value is RestRepresentation {
  return typeof value === 'object' && value !== null && 'element' in value && 'value' in value;
}

/** Turns a controller's RestRepresentation into vnd+xml or vnd+json, as negotiated. */
@Injectable()
export class RepresentationInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const req = context.switchToHttp().getRequest<Request>();
    const res = context.switchToHttp().getResponse<Response>();
    return next.handle().pipe(
      map((value: unknown) => {
        if (!isRestRepresentation(value)) {
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
 * Puts RepresentationInterceptor on a controller whose routes return RestRepresentations. It is
 * not global: an interceptor costs every route it wraps (Nest binds async contexts and builds
 * observables per request), and the routes that answer bytes themselves (/process, metrics, the
 * upload page, the fallback) have nothing for it to render.
 */
export const RendersRepresentations = (): ClassDecorator =>
  UseInterceptors(RepresentationInterceptor);
