import {
  ArgumentMetadata,
  CanActivate,
  ExecutionContext,
  Injectable,
  PipeTransform,
} from '@nestjs/common';
import type { Request } from 'express';
import { ApiError } from './api-error';
import { isFormPost } from './form-post';
import { malformed } from './missing-resource';

export const APPLICATION_HEADER = 'X-SVC-Application-Name';
const APPLICATION_NAME = /^\w+$/;
export const MAX_APPLICATION_NAME_LENGTH = 64;

/** Checks an application name (SPEC §3.1): ASCII word characters, 1 to 64 of them. */
export function checkApplicationName(name: string | undefined, where: string): string {
  if (name === undefined || name === '') {
    throw ApiError.badRequest(`${where} is missing or empty.`);
  }
  if (name.length > MAX_APPLICATION_NAME_LENGTH) {
    throw ApiError.badRequest(`${where} is longer than ${MAX_APPLICATION_NAME_LENGTH} characters.`);
  }
  if (!APPLICATION_NAME.test(name)) {
    throw ApiError.badRequest(
      `${where} "${name}" is invalid: use ASCII letters, digits and underscores only.`,
    );
  }
  return name;
}

/** Headers as sent, as [name, value] pairs: repeats stay visible (Node folds them into one string). */
export function rawHeaderPairs(req: Request): Array<[string, string]> {
  const pairs: Array<[string, string]> = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    pairs.push([req.rawHeaders[i], req.rawHeaders[i + 1]]);
  }
  return pairs;
}

/** Values of a header as sent, counting repeats. */
export function rawHeaderValues(req: Request, name: string): string[] {
  const lower = name.toLowerCase();
  return rawHeaderPairs(req)
    .filter(([headerName]) => headerName.toLowerCase() === lower)
    .map(([, value]) => value);
}

/** Reads and checks X-SVC-Application-Name: required, once, valid (else 400). */
export function applicationNameFromHeader(req: Request): string {
  const values = rawHeaderValues(req, APPLICATION_HEADER);
  if (values.length > 1) {
    throw ApiError.badRequest(
      `${APPLICATION_HEADER} is given ${values.length} times; give it once.`,
    );
  }
  return checkApplicationName(values[0]?.trim(), `The ${APPLICATION_HEADER} header`);
}

const APPLICATION = Symbol('applicationName');
type RequestWithApplication = Request & { [APPLICATION]?: string };

/**
 * Guard for routes that name their application in the header. A form post names it in a form
 * field instead, read (and checked, 400) only once the form has been received.
 */
@Injectable()
export class ApplicationNameGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<RequestWithApplication>();
    if (isFormPost(req)) {
      return true;
    }
    req[APPLICATION] = applicationNameFromHeader(req);
    return true;
  }
}

export function applicationNameOf(req: Request): string {
  return (req as RequestWithApplication)[APPLICATION] ?? applicationNameFromHeader(req);
}

/** Path parameter `{app}`: 400 when invalid. */
@Injectable()
export class ApplicationNamePipe implements PipeTransform<string, string> {
  transform(value: string, _metadata: ArgumentMetadata): string {
    return checkApplicationName(value, 'The application name in the path');
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Path parameter `{jobId}`: 400 unless a UUID; answered in lower case. */
@Injectable()
export class JobIdPipe implements PipeTransform<string, string> {
  transform(value: string, _metadata: ArgumentMetadata): string {
    if (!UUID.test(value)) {
      throw malformed.jobId(value);
    }
    return value.toLowerCase();
  }
}

export function isJobId(value: string): boolean {
  return UUID.test(value);
}
