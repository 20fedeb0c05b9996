import Negotiator from 'negotiator';
import type { Request } from 'express';
import type { RestFormat } from './representation/rest-representation';
import { ApiError } from './api-error';
import { isFormPost } from './form-post';
import { mediaTypeOf } from './media-type';

export interface NegotiatedFormat {
  format: RestFormat;
  /** The media type the answer is sent as. */
  mediaType: string;
}

/**
 * vnd+json is the mapped JSON RSB's clients read; plain application/json is the plain JSON a
 * generic client expects (docs/api.md#representations). Plain XML is the same XML.
 */
const REST_MEDIA_TYPES: Record<string, RestFormat> = {
  'application/vnd.svc+xml': 'xml',
  'application/vnd.svc+json': 'mapped-json',
  'application/xml': 'xml',
  'application/json': 'json',
};

export const DEFAULT_FORMAT: NegotiatedFormat = {
  format: 'xml',
  mediaType: 'application/vnd.svc+xml',
};

/**
 * What a form post is answered in: the seed's browser contract, the plain type of the format
 * (browsers choke on vnd types) with the seed's micro-format in it. So `application/json` gets
 * the mapped JSON (`{"jobToken":{…}}`) here, not the plain JSON it gets from the REST API: the
 * form is the seed's browser client, whose `application/json` has always meant that element.
 */
const FORM_FORMATS: Record<RestFormat, NegotiatedFormat> = {
  xml: { format: 'xml', mediaType: 'application/xml' },
  'mapped-json': { format: 'mapped-json', mediaType: 'application/json' },
  json: { format: 'mapped-json', mediaType: 'application/json' },
};

export const FORM_DEFAULT_FORMAT: NegotiatedFormat = FORM_FORMATS.xml;

/**
 * The media type Accept prefers among `offered` (q-values honoured), or null when it allows
 * none of them. An absent or empty Accept is the caller's default, not decided here.
 */
export function preferredMediaType(accept: string, offered: readonly string[]): string | null {
  return new Negotiator({ headers: { accept } }).mediaTypes([...offered])[0] ?? null;
}

/**
 * A form post's answer: application/json, in the mapped shape, when Accept prefers JSON (either
 * JSON type), else application/xml. Never 406: a browser's own Accept (text/html first) still
 * gets the token, as XML.
 */
function negotiateFormFormat(accept: string | undefined): NegotiatedFormat {
  if (accept === undefined || accept.trim() === '') {
    return FORM_DEFAULT_FORMAT;
  }
  const mediaType = preferredMediaType(accept, Object.keys(REST_MEDIA_TYPES));
  return mediaType ? FORM_FORMATS[REST_MEDIA_TYPES[mediaType]] : FORM_DEFAULT_FORMAT;
}

/**
 * Picks the answer's format from Accept (q-values honoured); absent or `*\/*` means vnd+xml.
 * Form posts get the plain types instead and are never refused.
 */
export function negotiateFormat(req: Pick<Request, 'headers' | 'method'>): NegotiatedFormat {
  const accept = req.headers.accept;
  if (isFormPost(req)) {
    return negotiateFormFormat(accept);
  }
  if (accept === undefined || accept.trim() === '') {
    return DEFAULT_FORMAT;
  }
  const mediaType = preferredMediaType(accept, Object.keys(REST_MEDIA_TYPES));
  if (!mediaType) {
    throw ApiError.notAcceptable(
      `Cannot answer in any type that Accept allows (${accept}); use application/vnd.svc+xml or application/vnd.svc+json.`,
    );
  }
  return { format: REST_MEDIA_TYPES[mediaType], mediaType };
}

/**
 * How the errors of a controller's paths are answered when none was settled for the request
 * (before its guard ran: a 401, a 403, a 405, a path no route takes): `json`, the JSON of a
 * route that speaks JSON only; `as-sent`, JSON for a request that sent JSON and does not ask
 * for another type.
 */
export type PathErrorFormat = 'json' | 'as-sent';

const pathRules: Array<{ prefix: () => string; rule: PathErrorFormat }> = [];

/** Registers the rule for every path under `prefix` (read when first needed). */
export function answerErrorsUnder(prefix: () => string, rule: PathErrorFormat): void {
  pathRules.push({ prefix, rule });
}

function pathRuleOf(path: string): PathErrorFormat | undefined {
  return pathRules.find(({ prefix }) => {
    const base = `/${prefix().replace(/^\/+|\/+$/g, '')}`;
    return path === base || path.startsWith(`${base}/`);
  })?.rule;
}

/**
 * The format of an error answer: its path's rule (answerErrorsUnder) when one applies, else the
 * one settled for the route when there is one, else the negotiated one when Accept allows one,
 * else XML.
 */
export function errorFormat(
  req: Pick<Request, 'headers' | 'method'> & { path?: string },
): NegotiatedFormat {
  // First: a path no route of its controller took is answered by the catch-all, whose own
  // format is the seed's default.
  const rule = req.path === undefined ? undefined : pathRuleOf(req.path);
  if (rule === 'json' || (rule === 'as-sent' && mediaTypeOf(req) === 'application/json')) {
    return negotiateJsonFormat(req);
  }
  const settled = (req as RequestWithFormat)[NEGOTIATED];
  if (settled) {
    return settled;
  }
  try {
    return negotiateFormat(req);
  } catch {
    return DEFAULT_FORMAT;
  }
}

const PLAIN_JSON: NegotiatedFormat = { format: 'json', mediaType: 'application/json' };

/**
 * The format of a route that speaks JSON only (exported functions): plain JSON unless Accept
 * prefers vnd+json or an XML type. Never 406: its own answers are JSON whatever Accept says.
 */
export function negotiateJsonFormat(req: Pick<Request, 'headers'>): NegotiatedFormat {
  const accept = req.headers.accept;
  if (accept === undefined || accept.trim() === '') {
    return PLAIN_JSON;
  }
  // Listed first: an Accept of */* or application/* picks plain JSON.
  const offered = ['application/json', ...Object.keys(REST_MEDIA_TYPES)];
  const mediaType = preferredMediaType(accept, offered);
  return mediaType ? { format: REST_MEDIA_TYPES[mediaType], mediaType } : PLAIN_JSON;
}

const NEGOTIATED = Symbol('negotiatedFormat');
type RequestWithFormat = Pick<Request, 'headers' | 'method'> & {
  [NEGOTIATED]?: NegotiatedFormat;
};

export function rememberFormat(req: Request, format: NegotiatedFormat): void {
  (req as RequestWithFormat)[NEGOTIATED] = format;
}

export function formatOf(req: Request): NegotiatedFormat {
  return (req as RequestWithFormat)[NEGOTIATED] ?? negotiateFormat(req);
}
