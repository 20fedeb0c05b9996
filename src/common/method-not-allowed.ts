import { HttpStatus } from '@nestjs/common';
import type { Request } from 'express';
import { ApiError } from './api-error';

/** 405 with the Allow header listing what the resource does support. */
export function methodNotAllowed(req: Request, allowed: string[]): ApiError {
  return new ApiError(
    HttpStatus.METHOD_NOT_ALLOWED,
    `${req.method} is not allowed on ${req.path}; allowed: ${allowed.join(', ')}.`,
    { Allow: allowed.join(', ') },
  );
}
