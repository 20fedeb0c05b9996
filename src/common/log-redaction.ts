/**
 * Fields pino replaces with "[redacted]" in every log line: credentials in request headers
 * (however the request is logged: as `req`, as `headers`, or at the top level) and secret
 * configuration values. Messages are plain strings and are not scanned: code must not put a
 * secret into a message in the first place (AuthenticationService logs the address and reason only).
 */
export const LOG_REDACT_PATHS: string[] = [
  ...['authorization', 'proxy-authorization', 'x-svc-api-key', 'cookie'].flatMap((header) => [
    `["${header}"]`,
    `headers["${header}"]`,
    `req.headers["${header}"]`,
    `request.headers["${header}"]`,
  ]),
  'res.headers["set-cookie"]',
  ...['password', 'adminPassword', 'passwordHash', 'keyHash', 'apiKey', 'secret'].flatMap(
    (field) => [field, `*.${field}`],
  ),
  ...[
    'adminPassword',
    'databaseUrl',
    'databaseListenUrl',
    'users',
    'apiKeys',
    'smtpPassword',
    'mailAccounts',
  ].map((key) => `config.${key}`),
];

export const LOG_REDACT_CENSOR = '[redacted]';

/** Query parameters whose values never reach a log line or a span. */
const CREDENTIAL_PARAMETER = /pass|secret|token|key|auth|credential/i;

/** A query string (without its "?") with the values of credential-like parameters masked. */
export function maskedQuery(query: string): string {
  return query
    .split('&')
    .map((pair) => {
      const equals = pair.indexOf('=');
      const name = equals < 0 ? pair : pair.slice(0, equals);
      return equals >= 0 && CREDENTIAL_PARAMETER.test(decodeURIComponentSafe(name))
        ? `${name}=${LOG_REDACT_CENSOR}`
        : pair;
    })
    .join('&');
}

function decodeURIComponentSafe(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}
