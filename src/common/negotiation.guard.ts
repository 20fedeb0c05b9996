import { CanActivate, ExecutionContext, Injectable, SetMetadata } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Request } from 'express';
import { PATH_METADATA } from '@nestjs/common/constants';
import {
  answerErrorsUnder,
  negotiateFormat,
  negotiateJsonFormat,
  PathErrorFormat,
  rememberFormat,
} from './negotiation';

const RAW_DATA = 'svc:rawData';
const JSON_ROUTES = 'svc:jsonRoutes';

/**
 * Marks a route that answers bytes of a fixed type (result data): Accept does not apply to it,
 * and its error answers use the negotiated format when there is one, else XML.
 */
export const RawData = (): MethodDecorator => SetMetadata(RAW_DATA, true);

/** The rule for the errors under a controller's path, made before any guard of it runs. */
function errorsUnderController(target: object, rule: PathErrorFormat): void {
  answerErrorsUnder(() => String(Reflect.getMetadata(PATH_METADATA, target) ?? ''), rule);
}

/**
 * Marks a controller whose routes speak JSON only (exported functions): their errors and
 * representations are plain JSON unless Accept prefers vnd+json or XML, and Accept never
 * refuses them. So are the errors made before a route of it is reached (401, 403, 405).
 */
export const JsonRoutes =
  (): ClassDecorator =>
  (target): void => {
    SetMetadata(JSON_ROUTES, true)(target);
    errorsUnderController(target, 'json');
  };

/**
 * Marks a controller whose requests may send JSON or XML (`/process`): an error answer to a
 * request that sent JSON is JSON (plain unless Accept prefers another type), made before the
 * route is reached (401, 403) or by it.
 */
export const ErrorsAsSent =
  (): ClassDecorator =>
  (target): void => {
    errorsUnderController(target, 'as-sent');
  };

/** Runs first on every route: settles the answer's format, or 406 before any work is done. */
@Injectable()
export class NegotiationGuard implements CanActivate {
  constructor(private readonly reflector: Reflector) {}

  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<Request>();
    if (this.reflector.get<boolean | undefined>(JSON_ROUTES, context.getClass())) {
      rememberFormat(req, negotiateJsonFormat(req));
      return true;
    }
    if (this.reflector.get<boolean | undefined>(RAW_DATA, context.getHandler())) {
      return true;
    }
    rememberFormat(req, negotiateFormat(req));
    return true;
  }
}
