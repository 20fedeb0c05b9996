import Negotiator from 'negotiator';
import type { Request } from 'express';
import type { RestFormat } from './representation/rest-representation';
import { ApiError } from './api-error';
import { isFormPost } from './form-post';

export interface NegotiatedFormat {
  format: RestFormat;
  /** The media type the answer is sent as. */
  mediaType: string;
}

const REST_MEDIA_TYPES: Record<string, RestFormat> = {
  'application/vnd.svc+xml': 'xml',
  'application/vnd.svc+json': 'json',
  // Plain types are understood too (form posts and generic clients ask for them).
  'application/xml': 'xml',
  'application/json': 'json',
};

export const DEFAULT_FORMAT: NegotiatedFormat = {
  format: 'xml',
  mediaType: 'application/vnd.svc+xml',
};

/** What a form post is answered in: the plain type of the format (browsers choke on vnd types). */
const FORM_MEDIA_TYPES: Record<RestFormat, string> = {
  xml: 'application/xml',
  json: 'application/json',
};

export const FORM_DEFAULT_FORMAT: NegotiatedFormat = {
  format: 'xml',
  mediaType: FORM_MEDIA_TYPES.xml,
};

/**
 * The media type Accept prefers among `offered` (q-values honoured), or null when it allows
 * none of them. An absent or empty Accept is the caller's default, not decided here.
 */
export function preferredMediaType(accept: string, offered: readonly string[]): string | null {
  return new Negotiator({ headers: { accept } }).mediaTypes([...offered])[0] ?? null;
}

/**
 * A form post's answer (SPEC §3.1): application/json when Accept prefers JSON (plain or vnd),
 * else application/xml. Never 406: a browser's own Accept (text/html first) still gets the
 * token, as XML.
 */
function negotiateFormFormat(accept: string | undefined): NegotiatedFormat {
  if (accept === undefined || accept.trim() === '') {
    return FORM_DEFAULT_FORMAT;
  }
  const mediaType = preferredMediaType(accept, Object.keys(REST_MEDIA_TYPES));
  const format = mediaType ? REST_MEDIA_TYPES[mediaType] : FORM_DEFAULT_FORMAT.format;
  return { format, mediaType: FORM_MEDIA_TYPES[format] };
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

/** The format of an error answer: the negotiated one when Accept allows one, else XML. */
export function errorFormat(req: Pick<Request, 'headers' | 'method'>): NegotiatedFormat {
  try {
    return negotiateFormat(req);
  } catch {
    return DEFAULT_FORMAT;
  }
}

const NEGOTIATED = Symbol('negotiatedFormat');
type RequestWithFormat = Request & { [NEGOTIATED]?: NegotiatedFormat };

export function rememberFormat(req: Request, format: NegotiatedFormat): void {
  (req as RequestWithFormat)[NEGOTIATED] = format;
}

export function formatOf(req: Request): NegotiatedFormat {
  return (req as RequestWithFormat)[NEGOTIATED] ?? negotiateFormat(req);
}
