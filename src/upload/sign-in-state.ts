import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/** What a sign-in under way keeps until the provider sends the browser back. */
export interface SignInChecks {
  codeVerifier: string;
  state: string;
  nonce: string;
}

const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Bound to the ciphertext: a value sealed for anything else does not open as a sign-in. */
const CONTEXT = Buffer.from('svc sign-in state v1');

/**
 * The state of a sign-in under way, sealed into the browser's cookie (AES-256-GCM: encrypted and
 * authenticated) instead of a row per anonymous request: starting a sign-in stores nothing, so
 * any number of them costs the service no space. A value that was changed, sealed with another
 * key or is past its deadline opens as null.
 */
export class SignInStateSealer {
  private readonly key: Buffer;

  /**
   * `secret`: SIGN_IN_SECRET, else OIDC_CLIENT_SECRET (both the same on every node); null: a
   * random key of this process, so a sign-in must come back to the node that started it.
   */
  constructor(secret: string | null) {
    this.key = Buffer.from(
      hkdfSync('sha256', secret ?? randomBytes(32), 'svc', 'sign-in state cookie', 32),
    );
  }

  seal(checks: SignInChecks, expiresAt: number): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv).setAAD(CONTEXT);
    const plain = Buffer.from(JSON.stringify({ ...checks, expiresAt }), 'utf8');
    const sealed = Buffer.concat([cipher.update(plain), cipher.final()]);
    return Buffer.concat([iv, sealed, cipher.getAuthTag()]).toString('base64url');
  }

  open(value: string, now: number): SignInChecks | null {
    const bytes = Buffer.from(value, 'base64url');
    if (bytes.length <= IV_BYTES + TAG_BYTES) {
      return null;
    }
    let opened: unknown;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, bytes.subarray(0, IV_BYTES))
        .setAAD(CONTEXT)
        .setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
      const plain = Buffer.concat([
        decipher.update(bytes.subarray(IV_BYTES, bytes.length - TAG_BYTES)),
        decipher.final(),
      ]);
      opened = JSON.parse(plain.toString('utf8'));
    } catch {
      return null;
    }
    const { codeVerifier, state, nonce, expiresAt } = opened as Record<string, unknown>;
    return typeof codeVerifier === 'string' &&
      typeof state === 'string' &&
      typeof nonce === 'string' &&
      typeof expiresAt === 'number' &&
      expiresAt > now
      ? { codeVerifier, state, nonce }
      : null;
  }
}
