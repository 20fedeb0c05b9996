import {
  ArgumentMetadata,
  createParamDecorator,
  ExecutionContext,
  Injectable,
  PipeTransform,
} from '@nestjs/common';
import type { Request } from 'express';
import { ApiError } from './api-error';
import {
  unvalidatableProblem,
  DTO_VALIDATION,
  isJsonObject,
  jsonObjectMessageOf,
} from './dto-validation';
import { readLimitedBody } from './limited-body';
import { mediaTypeOf } from './media-type';

/** How large a JSON body may be, and what a client is told when it is not one. */
export interface JsonBodyRule {
  maxBytes: number;
  /** 415's message, for another Content-Type. */
  wrongType: string;
  /** 413's message, above maxBytes. */
  tooLarge: string;
}

/** Admin requests carry small JSON documents; anything larger is not one. */
export const ADMIN_JSON_BODY: JsonBodyRule = {
  maxBytes: 64 * 1024,
  wrongType: 'The body must be JSON (Content-Type: application/json).',
  tooLarge: 'The JSON body may have at most 64 KiB.',
};

/** A request's JSON body: 415 for another type, 413 above the rule's size, 400 when it does not parse. */
export async function readJsonBody(
  req: Request,
  rule: JsonBodyRule = ADMIN_JSON_BODY,
): Promise<unknown> {
  if (mediaTypeOf(req) !== 'application/json') {
    throw ApiError.unsupportedMediaType(rule.wrongType);
  }
  const bytes = await readLimitedBody(req, rule.maxBytes, rule.tooLarge);
  try {
    return JSON.parse(bytes.toString('utf8')) as unknown;
  } catch (error) {
    throw ApiError.badRequest(`The body is not JSON: ${(error as Error).message.slice(0, 200)}`);
  }
}

/**
 * Reads the body of the request it is given; Nest awaits a pipe before the handler runs. For a DTO
 * marked `@JsonObject`: refused with its message when the body is not a JSON object, and when the
 * validation could not take it (`unvalidatableProblem`: nested too deep, a name it deletes).
 */
@Injectable()
class JsonBodyPipe implements PipeTransform<Request, Promise<unknown>> {
  constructor(private readonly rule: JsonBodyRule) {}

  async transform(req: Request, { metatype }: ArgumentMetadata): Promise<unknown> {
    const body = await readJsonBody(req, this.rule);
    const notAnObject = jsonObjectMessageOf(metatype);
    if (notAnObject === undefined) {
      return body;
    }
    const problem = isJsonObject(body) ? unvalidatableProblem(body) : notAnObject;
    if (problem !== undefined) {
      throw ApiError.badRequest(problem);
    }
    return body;
  }
}

const TheRequest = createParamDecorator((_data: unknown, context: ExecutionContext): Request =>
  context.switchToHttp().getRequest<Request>(),
);

/**
 * A handler's parameter: the request's JSON body (415/413/400 as `readJsonBody`), checked against
 * the parameter's DTO class by class-validator (`DTO_VALIDATION`: the first problem as a 400) and
 * handed over as an instance of it. There is no body parser in front of the routes (bodies are
 * streams, read under limits of their own), so Nest's `@Body()` would find nothing.
 */
export const JsonBody = (rule: JsonBodyRule = ADMIN_JSON_BODY): ParameterDecorator =>
  TheRequest(undefined, new JsonBodyPipe(rule), DTO_VALIDATION);
