import { CanActivate, ExecutionContext, Injectable, SetMetadata } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Request } from 'express';
import { negotiateFormat, rememberFormat } from './negotiation';

const RAW_DATA = 'svc:rawData';

/**
 * Marks a route that answers bytes of a fixed type (result data): Accept does not apply to it,
 * and its error answers use the negotiated format when there is one, else XML.
 */
export const RawData = (): MethodDecorator => SetMetadata(RAW_DATA, true);

/** Runs first on every route: settles the answer's format, or 406 before any work is done. */
@Injectable()
export class NegotiationGuard implements CanActivate {
  constructor(private readonly reflector: Reflector) {}

  canActivate(context: ExecutionContext): boolean {
    if (this.reflector.get<boolean | undefined>(RAW_DATA, context.getHandler())) {
      return true;
    }
    const req = context.switchToHttp().getRequest<Request>();
    rememberFormat(req, negotiateFormat(req));
    return true;
  }
}
