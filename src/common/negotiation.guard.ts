import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { negotiateFormat, rememberFormat } from './negotiation';

/** Runs first on every route: settles the answer's format, or 406 before any work is done. */
@Injectable()
export class NegotiationGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<Request>();
    rememberFormat(req, negotiateFormat(req));
    return true;
  }
}
