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
  ...['adminPassword', 'databaseUrl', 'databaseListenUrl', 'users', 'apiKeys'].map(
    (key) => `config.${key}`,
  ),
];

export const LOG_REDACT_CENSOR = '[redacted]';
