import type { Request } from 'express';
import getRawBody from 'raw-body';
import { CALLBACK_URL_HEADER } from '../callbacks/callback-url.policy';
import { ApiError } from '../common/api-error';
import { applicationNameOf, rawHeaderPairs, rawHeaderValues } from '../common/application-name';
import { mediaTypeOf } from '../common/media-type';
import { publicBaseUrl } from '../common/public-uri';
import type { RestApiConfig } from '../config/config-slices';
import { KIND_OF_MEDIA_TYPE } from '../job-core/function-call-result';
import { ZIP_MEDIA_TYPES } from './job-archive';
import { parseMetaHeaders } from '../job-core/job-meta';
import { parsePriority, PRIORITY_HEADER } from './job-priority';
import { JobSource } from '../queue/queue.types';
import { principalOf } from '../security/principal';
import type { CallbackRequest, IntakePart, Submission } from './jobs.service';

/**
 * A REST `POST /jobs` (not a form) as the intake takes it: the body's media type says whether it
 * is a ZIP (415 for anything else) or a function call's payload, the `X-SVC-*` headers are the
 * meta and the callback. A function call's payload is read whole (R takes it as one string); a
 * ZIP body is handed on as a stream, which the intake spools to disk.
 */
export async function readRestSubmission(
  req: Request,
  config: Pick<RestApiConfig, 'maxRequestBytes' | 'publicBaseUrl'>,
): Promise<Submission> {
  const mediaType = mediaTypeOf(req);
  const functionCall = KIND_OF_MEDIA_TYPE[mediaType];
  if (!functionCall && !ZIP_MEDIA_TYPES.has(mediaType)) {
    throw ApiError.unsupportedMediaType(
      mediaType
        ? `Content-Type ${mediaType} is not supported; send application/zip, application/xml or application/json.`
        : 'Content-Type is missing; send application/zip, application/xml or application/json.',
    );
  }
  const meta = parseMetaHeaders(rawHeaderPairs(req));
  const callback = callbackRequest(req, config.publicBaseUrl);
  const body: IntakePart = functionCall
    ? {
        name: 'body',
        label: null,
        content: await getRawBody(req, { limit: config.maxRequestBytes }),
        zip: false,
      }
    : { name: 'body', label: null, stream: req, declaredBytes: declaredLength(req), zip: true };
  return {
    applicationName: applicationNameOf(req),
    source: JobSource.REST,
    meta,
    callback,
    parts: [body],
    functionCall,
    caller: { kind: 'request', principal: principalOf(req) ?? null },
    priority: parsePriority(rawHeaderValues(req, PRIORITY_HEADER), `The header ${PRIORITY_HEADER}`),
  };
}

/** The callback the `X-SVC-Callback-Url` header asks for (checked by JobsService); once at most. */
export function callbackRequest(
  req: Request,
  configuredBase: string | null,
): CallbackRequest | null {
  const values = rawHeaderValues(req, CALLBACK_URL_HEADER);
  if (values.length > 1) {
    throw ApiError.badRequest(`The header ${CALLBACK_URL_HEADER} is given more than once.`);
  }
  return values.length === 0
    ? null
    : { url: values[0], linksBase: publicBaseUrl(req, configuredBase) };
}

/** The body's announced length (Content-Length), if any. */
function declaredLength(req: Request): number | undefined {
  const value = Number(req.headers['content-length']);
  return Number.isFinite(value) ? value : undefined;
}
