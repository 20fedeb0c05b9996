import { domainToASCII } from 'node:url';

/**
 * The Authentication-Results header (RFC 8601) that the operator's own mail server adds on
 * delivery, read to decide whether a message's From is vouched for (an account's
 * `requireAuthenticationResults`, docs/security.md#what-mail-is-trusted).
 */

/** One method's result: `dkim=pass header.d=example.com` is dkim, pass, {header.d: example.com}. */
export interface AuthenticationResult {
  method: string;
  result: string;
  properties: Record<string, string>;
}

export interface AuthenticationResults {
  authservId: string;
  results: AuthenticationResult[];
}

/** The value without comments (nested parentheses) and with quoted strings unquoted. */
function withoutComments(value: string): string {
  let out = '';
  let depth = 0;
  let quoted = false;
  for (let i = 0; i < value.length; i++) {
    const c = value[i];
    if (c === '\\' && (quoted || depth > 0)) {
      if (!quoted) {
        i += 1;
        continue;
      }
      out += value[i + 1] ?? '';
      i += 1;
    } else if (quoted) {
      if (c === '"') {
        quoted = false;
      } else {
        out += c === ';' ? '\u0000' : c; // a ';' inside quotes separates nothing
      }
    } else if (c === '(') {
      depth += 1;
    } else if (c === ')') {
      depth = Math.max(0, depth - 1);
    } else if (depth === 0) {
      if (c === '"') {
        quoted = true;
      } else {
        out += c;
      }
    }
  }
  return out;
}

/**
 * The header's value taken apart; null when it has no authserv-id. Methods and results are
 * lower case; property values keep their case, with `;` inside a quoted value kept as it was.
 */
export function parseAuthenticationResults(value: string): AuthenticationResults | null {
  const [head, ...resinfos] = withoutComments(value.replace(/\r?\n/g, ' ')).split(';');
  const authservId = head.trim().split(/\s+/)[0] ?? '';
  if (authservId === '') {
    return null;
  }
  const results: AuthenticationResult[] = [];
  for (const resinfo of resinfos) {
    // CFWS may surround "=": joined first, so each token is one name=value.
    const tokens = resinfo
      .replace(/\s*=\s*/g, '=')
      .trim()
      .split(/\s+/)
      .filter((t) => t !== '');
    const [method, result] = (tokens[0] ?? '').split('=');
    if (method === undefined || result === undefined || method === '' || result === '') {
      continue; // "none", or not a result
    }
    const properties: Record<string, string> = {};
    for (const token of tokens.slice(1)) {
      const at = token.indexOf('=');
      if (at > 0) {
        properties[token.slice(0, at).toLowerCase()] = token
          .slice(at + 1)
          .replaceAll('\u0000', ';');
      }
    }
    results.push({
      method: method.split('/')[0].toLowerCase(),
      result: result.toLowerCase(),
      properties,
    });
  }
  return { authservId, results };
}

/**
 * Whether the topmost Authentication-Results of `authservId` among `headerValues` (in the
 * message's order: the topmost is the one added last, by the receiving server) says that mail
 * from `fromDomain` passed DMARC, or DKIM with a signature of that very domain. Lower headers
 * of the same id are ignored: they were in the message before the operator's server saw it.
 */
export function fromDomainPassed(
  headerValues: string[],
  authservId: string,
  fromDomain: string,
): boolean {
  const own = headerValues
    .map(parseAuthenticationResults)
    .find((parsed) => parsed?.authservId.toLowerCase() === authservId.toLowerCase());
  if (own === undefined || own === null) {
    return false;
  }
  // Servers write the A-label (xn--…); the parser gives the From's domain in Unicode.
  const domain = (domainToASCII(fromDomain) || fromDomain).toLowerCase();
  return own.results.some((r) => {
    if (r.result !== 'pass') {
      return false;
    }
    if (r.method === 'dmarc') {
      return r.properties['header.from']?.toLowerCase() === domain;
    }
    if (r.method === 'dkim') {
      return (
        r.properties['header.d']?.toLowerCase() === domain ||
        r.properties['header.i']?.toLowerCase().endsWith(`@${domain}`) === true
      );
    }
    return false;
  });
}
