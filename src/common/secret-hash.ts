import { createHash, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

/**
 * Password and API-key hashes, self-describing so the cost can be raised later without breaking
 * old entries: `scrypt$<N>$<r>$<p>$<salt, base64>$<hash, base64>` (Node's own scrypt, no
 * dependency). N=2^15, r=8 costs about 32 MiB and a few tens of milliseconds per check, which is
 * why successful checks are cached for a short while (see AuthenticationService).
 */
export const SCRYPT_DEFAULTS = { N: 32768, r: 8, p: 1 } as const;
const SALT_BYTES = 16;
const KEY_BYTES = 32;
const HASH_FORMAT =
  /^scrypt\$(\d{1,8})\$(\d{1,3})\$(\d{1,3})\$([A-Za-z0-9+/]+={0,2})\$([A-Za-z0-9+/]+={0,2})$/;

interface ParsedHash {
  N: number;
  r: number;
  p: number;
  salt: Buffer;
  hash: Buffer;
}

function parseHash(encoded: string): ParsedHash | null {
  const match = HASH_FORMAT.exec(encoded);
  if (!match) {
    return null;
  }
  const [N, r, p] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const salt = Buffer.from(match[4], 'base64');
  const hash = Buffer.from(match[5], 'base64');
  // N a power of two above 1; bounded so a hostile config cannot make each check take forever.
  const sane =
    N > 1 &&
    (N & (N - 1)) === 0 &&
    N <= 2 ** 20 &&
    r >= 1 &&
    r <= 32 &&
    p >= 1 &&
    p <= 16 &&
    salt.length >= 8 &&
    hash.length >= 16;
  return sane ? { N, r, p, salt, hash } : null;
}

/** Whether a configured value is a hash this module can verify (config validation). */
export function isSecretHash(encoded: string): boolean {
  return parseHash(encoded) !== null;
}

function derive(secret: string, salt: Buffer, N: number, r: number, p: number, length: number) {
  return new Promise<Buffer>((resolve, reject) =>
    scrypt(secret, salt, length, { N, r, p, maxmem: 256 * N * r + 1024 * 1024 }, (error, key) =>
      error ? reject(error) : resolve(key),
    ),
  );
}

export async function hashSecret(
  secret: string,
  params: { N: number; r: number; p: number } = SCRYPT_DEFAULTS,
): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const hash = await derive(secret, salt, params.N, params.r, params.p, KEY_BYTES);
  return `scrypt$${params.N}$${params.r}$${params.p}$${salt.toString('base64')}$${hash.toString('base64')}`;
}

/** Checks a secret against a stored hash in constant time; false for a malformed hash. */
export async function verifySecret(secret: string, encoded: string): Promise<boolean> {
  const parsed = parseHash(encoded);
  if (!parsed) {
    return false;
  }
  const candidate = await derive(
    secret,
    parsed.salt,
    parsed.N,
    parsed.r,
    parsed.p,
    parsed.hash.length,
  );
  return timingSafeEqual(candidate, parsed.hash);
}

/**
 * Compares two plain-text secrets (ADMIN_PASSWORD) without leaking, through timing, where they
 * differ or how long the stored one is: both sides are digested to the same length first.
 */
export function plainSecretsEqual(given: string, expected: string): boolean {
  const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();
  return timingSafeEqual(digest(given), digest(expected));
}

/** A fresh random secret for an API key: 32 bytes, base64url (43 characters). */
export function randomSecret(): string {
  return randomBytes(32).toString('base64url');
}

const FAST_HASH_PREFIX = 'sha256$';

/**
 * The stored form of a generated key's secret (run-time API keys): `sha256$<base64>`. A secret of
 * 32 random bytes cannot be guessed, so a slow hash would only cost every request without
 * adding safety; configured keys, which a person may have chosen, stay scrypt.
 */
export function fastSecretHash(secret: string): string {
  return FAST_HASH_PREFIX + createHash('sha256').update(secret, 'utf8').digest('base64');
}

/** Checks a secret against fastSecretHash's output in constant time; false for anything else. */
export function fastSecretMatches(secret: string, encoded: string): boolean {
  if (!encoded.startsWith(FAST_HASH_PREFIX)) {
    return false;
  }
  const expected = Buffer.from(encoded.slice(FAST_HASH_PREFIX.length), 'base64');
  const given = createHash('sha256').update(secret, 'utf8').digest();
  return expected.length === given.length && timingSafeEqual(given, expected);
}
