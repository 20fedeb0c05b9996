import { Controller, Get, Header, Param, Post, Req } from '@nestjs/common';
import type { Request } from 'express';
import { ApiError } from '../common/api-error';
import { checkApplicationName } from '../common/application-name';
import { HttpAnswer } from '../common/http-answer';
import { readLimitedBody } from '../common/limited-body';
import { mediaTypeOf } from '../common/media-type';
import { formatOf } from '../common/negotiation';
import { JsonRoutes, RawData } from '../common/negotiation.guard';
import { renderRepresentation } from '../common/representation/rest-representation';
import { publicBaseUrl } from '../common/public-uri';
import { NodeConfig, ProcessConfig } from '../config/config-slices';
import { Access } from '../security/access.decorator';
import type { ExportedFunction } from '../r-engine/exported-functions';
import { CallArguments, checkArguments } from './function-arguments';
import { FunctionsService } from './functions.service';

/**
 * Exported R functions (docs/functions.md): `POST /functions/{app}/{fn}` with a JSON object of
 * named arguments answers the function's value as JSON; the listing and the application's own
 * OpenAPI description say what there is. Who may call `/process` for the application may call
 * these.
 */
@Controller('svc/api/rest/functions')
@JsonRoutes()
export class FunctionsController {
  constructor(
    private readonly node: NodeConfig,
    private readonly config: ProcessConfig,
    private readonly functions: FunctionsService,
  ) {}

  @Get(':app')
  @Access('functionCall')
  @RawData()
  @Header('Cache-Control', 'no-store')
  async list(@Param('app') app: string): Promise<{ functions: ExportedFunction[] }> {
    return {
      functions: await this.functions.listExported(checkApplicationName(app, 'The application')),
    };
  }

  @Get(':app/openapi.json')
  @Access('functionCall')
  @RawData()
  @Header('Cache-Control', 'no-store')
  async openApi(@Param('app') app: string, @Req() req: Request): Promise<object> {
    return this.functions.openApi(
      checkApplicationName(app, 'The application'),
      publicBaseUrl(req, this.node.publicBaseUrl),
    );
  }

  /** One function as the listing describes it; 404 as a call of it would answer. */
  @Get(':app/:fn')
  @Access('functionCall')
  @RawData()
  @Header('Cache-Control', 'no-store')
  describe(@Param('app') app: string, @Param('fn') fn: string): Promise<ExportedFunction> {
    return this.functions.find(checkApplicationName(app, 'The application'), fn);
  }

  @Post(':app/:fn')
  @Access('functionCall')
  @RawData()
  async call(
    @Param('app') app: string,
    @Param('fn') fn: string,
    @Req() req: Request,
  ): Promise<HttpAnswer> {
    const applicationName = checkApplicationName(app, 'The application');
    // Before the body is read: an unknown function costs the caller no upload.
    const exported = await this.functions.find(applicationName, fn);
    const args = await readArguments(req, this.config.maxRequestBytes);
    // Before R and before the queue: a call that cannot run is refused the same way either way.
    checkArguments(exported, args);
    if (prefersAsync(req)) {
      const job = await this.functions.queue(
        applicationName,
        fn,
        args.json,
        req,
        publicBaseUrl(req, this.node.publicBaseUrl),
      );
      // The job token as every other JSON answer here: plain unless Accept asks for vnd+json.
      const { format, mediaType } = formatOf(req);
      return new HttpAnswer(renderRepresentation(job.token, format), {
        status: 202,
        headers: {
          'Content-Type': `${mediaType}; charset=utf-8`,
          Vary: 'Accept',
          Location: job.resultUri,
          'Preference-Applied': 'respond-async',
        },
      });
    }
    const answer = await this.functions.call(applicationName, fn, args.json);
    return new HttpAnswer(answer.body, {
      status: answer.status,
      headers: { 'Content-Type': 'application/json; charset=utf-8' },
    });
  }
}

/** Whether `Prefer` (RFC 7240) asks for respond-async, in any of its headers and preferences. */
export function prefersAsync(req: Request): boolean {
  const prefer = req.headers.prefer;
  const values = Array.isArray(prefer) ? prefer : prefer === undefined ? [] : [prefer];
  return values.some((value) =>
    value
      .split(',')
      .some((preference) => preference.split(';')[0].trim().toLowerCase() === 'respond-async'),
  );
}

/** The body: a JSON object of named arguments (415 for another type, 413, 400). */
async function readArguments(req: Request, maxBytes: number): Promise<CallArguments> {
  if (mediaTypeOf(req) !== 'application/json') {
    throw ApiError.unsupportedMediaType(
      'Send the arguments as a JSON object (Content-Type: application/json).',
    );
  }
  const body = await readLimitedBody(
    req,
    maxBytes,
    `The arguments may have at most ${maxBytes} bytes (MAX_REQUEST_BYTES).`,
  );
  const text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });
  let json: string;
  try {
    json = text.decode(body);
  } catch {
    throw ApiError.badRequest('The body is not UTF-8 text.');
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch (error) {
    throw ApiError.badRequest(`The body is not JSON: ${(error as Error).message.slice(0, 200)}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw ApiError.badRequest(
      'The body must be a JSON object of the named arguments, such as {"x": 1}.',
    );
  }
  if (depthOf(parsed) > MAX_ARGUMENT_DEPTH) {
    throw ApiError.badRequest(
      `The arguments are nested deeper than ${MAX_ARGUMENT_DEPTH} levels of arrays and objects.`,
    );
  }
  return { json, values: parsed as Record<string, unknown> };
}

/** Nesting R is asked to convert at most (json.R's own bound is the same). */
export const MAX_ARGUMENT_DEPTH = 64;

/** How deep arrays and objects nest in a parsed JSON value (iterative: no stack to exhaust). */
function depthOf(value: unknown): number {
  let deepest = 0;
  const pending: Array<[unknown, number]> = [[value, 1]];
  while (pending.length > 0) {
    const [item, depth] = pending.pop() as [unknown, number];
    if (typeof item === 'object' && item !== null) {
      deepest = Math.max(deepest, depth);
      for (const child of Object.values(item)) {
        pending.push([child, depth + 1]);
      }
    }
  }
  return deepest;
}
