/**
 * The effective configuration with its secrets masked, for `GET /admin/system/configuration`.
 * Secrets are found by name, so keys added later (passwords, API keys, user maps) are covered
 * without a list to keep up to date: a key that names a password, secret, token, hash, salt,
 * credential or private key, or that ends in `key(s)` or `users`, has its whole value masked;
 * and credentials inside any URL (DATABASE_URL) are masked wherever they appear.
 */

export const MASK = '********';

const SECRET_NAME =
  /pass(word|wd|phrase)?|secret|token|hash|salt|credential|private|cookie|(key|keys|users)$/i;

function isSecretName(name: string): boolean {
  return SECRET_NAME.test(name);
}

/** `postgres://user:pw@host/db` -> `postgres://user:********@host/db`; a bare user name stays. */
export function maskUrlCredentials(text: string): string {
  return text.replace(
    /\b([a-z][a-z0-9+.-]*:\/\/)([^\s/@:]*)(?::([^\s/@]*))?@/gi,
    (whole: string, scheme: string, user: string, password: string | undefined) =>
      password === undefined ? whole : `${scheme}${user}:${MASK}@`,
  );
}

type Plain = null | boolean | number | string | Plain[] | { [key: string]: Plain };

function maskValue(value: unknown): Plain {
  if (value === null || value === undefined) {
    return null;
  }
  if (typeof value === 'string') {
    return maskUrlCredentials(value);
  }
  if (typeof value === 'number' || typeof value === 'boolean') {
    return value;
  }
  if (Array.isArray(value)) {
    return value.map(maskValue);
  }
  if (typeof value === 'object') {
    return maskObject(value as Record<string, unknown>);
  }
  return typeof value === 'bigint' ? value.toString() : null; // functions, symbols: not configuration
}

function maskObject(object: Record<string, unknown>): { [key: string]: Plain } {
  const masked: { [key: string]: Plain } = {};
  for (const [key, value] of Object.entries(object)) {
    const empty =
      value === null ||
      value === undefined ||
      value === '' ||
      (typeof value === 'object' && Object.keys(value).length === 0);
    // An unset secret stays visibly unset: that is what an admin checks.
    masked[key] = isSecretName(key) && !empty ? MASK : maskValue(value);
  }
  return masked;
}

/** A JSON-ready copy of `config` with every secret replaced by MASK. */
export function maskedConfiguration(config: object): Record<string, Plain> {
  return maskObject({ ...config });
}
