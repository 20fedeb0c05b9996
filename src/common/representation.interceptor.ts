import {
  CallHandler,
  ExecutionContext,
  Injectable,
  NestInterceptor,
  UseInterceptors,
} from '@nestjs/common';
import type { Request, Response } from 'express';
import { map, Observable } from 'rxjs';
import { HttpAnswer } from './http-answer';
import { formatOf } from './negotiation';
import { isRestView, renderRepresentation } from './representation/rest-representation';

/**
 * Turns a controller's RestView into vnd+xml or vnd+json, as negotiated; also the RestView of
 * an HttpAnswer, whose status and headers stay.
 */
@Injectable()
export class RepresentationInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const req = context.switchToHttp().getRequest<Request>();
    const res = context.switchToHttp().getResponse<Response>();
    return next.handle().pipe(
      map((value: unknown) => {
        const view = value instanceof HttpAnswer ? value.body : value;
        if (!isRestView(view)) {
          return value;
        }
        const { format, mediaType } = formatOf(req);
        res.setHeader('Content-Type', `${mediaType}; charset=utf-8`);
        res.vary('Accept'); // appended: CORS adds Origin
        const rendered = renderRepresentation(view, format);
        return value instanceof HttpAnswer
          ? new HttpAnswer(rendered, { status: value.status, headers: value.headers })
          : rendered;
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
