/** XOP (XML-binary Optimized Packaging) names and the `cid:` URL rules of RFC 2392. */
export const XOP_NAMESPACE = 'http://www.w3.org/2004/08/xop/include';

/**
 * A Content-ID header value or `start` parameter without its angle brackets: the form a
 * `cid:` URL names once it is URL-decoded.
 */
export function bareContentId(headerValue: string): string {
  const trimmed = headerValue.trim();
  return trimmed.startsWith('<') && trimmed.endsWith('>') ? trimmed.slice(1, -1) : trimmed;
}

/** The Content-ID a `cid:` href points at, or undefined when it is not a valid `cid:` URL. */
export function contentIdFromHref(href: string): string | undefined {
  const trimmed = href.trim();
  if (!/^cid:/i.test(trimmed)) {
    return undefined;
  }
  try {
    return decodeURIComponent(trimmed.slice(4));
  } catch {
    return undefined;
  }
}

/**
 * A `cid:` URL for a Content-ID (bare, without brackets). RFC 2392 URL-encodes the
 * addr-spec; `@` and the other characters legal in a message id stay readable.
 */
export function hrefForContentId(contentId: string): string {
  return `cid:${encodeURIComponent(contentId).replace(/%40/g, '@')}`;
}
