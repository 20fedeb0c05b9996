import {
  CallHandler,
  ExecutionContext,
  Injectable,
  NestInterceptor,
  UseInterceptors,
} from '@nestjs/common';
import type { CookieOptions, Response } from 'express';
import { map, Observable } from 'rxjs';

/** A cookie to set (`value`) or to clear (`value: null`); the options must name its path. */
export interface CookieChange {
  name: string;
  value: string | null;
  options: CookieOptions;
}

/** A handler's answer with the cookies it changes; the rest is answered as Nest would. */
export interface WithCookies {
  cookies: CookieChange[];
}

function hasCookies(value: unknown): value is WithCookies {
  return (
    typeof value === 'object' &&
    value !== null &&
    Array.isArray((value as Partial<WithCookies>).cookies)
  );
}

/**
 * Sets the cookies a handler returns, then passes the rest of its answer on (to @Redirect, or
 * as the body): handlers return values and never hold the response.
 */
@Injectable()
export class CookiesInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const res = context.switchToHttp().getResponse<Response>();
    return next.handle().pipe(
      map((value: unknown) => {
        if (!hasCookies(value)) {
          return value;
        }
        const { cookies, ...answer } = value;
        for (const { name, value: cookie, options } of cookies) {
          if (cookie === null) {
            res.clearCookie(name, options);
          } else {
            res.cookie(name, cookie, options);
          }
        }
        return answer;
      }),
    );
  }
}

/**
 * Puts CookiesInterceptor on a controller whose routes return cookies. Not global, for the same
 * reason as RendersRepresentations: an interceptor costs every route it wraps.
 */
export const SetsCookies = (): ClassDecorator => UseInterceptors(CookiesInterceptor);
