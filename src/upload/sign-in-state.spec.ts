import { SignInStateSealer } from './sign-in-state';

const CHECKS = { codeVerifier: 'verifier-'.repeat(5), state: 'state-1', nonce: 'nonce-1' };
const SECRET = 'a sign-in secret of 32 characters or more';
const NOW = 1_700_000_000_000;

describe('SignInStateSealer', () => {
  it('opens what it sealed until the deadline, then nothing', () => {
    const sealer = new SignInStateSealer(SECRET);
    const sealed = sealer.seal(CHECKS, NOW + 600_000);
    expect(sealed).toMatch(/^[\w-]+$/);
    expect(sealed).not.toContain('verifier');
    expect(sealer.open(sealed, NOW)).toEqual(CHECKS);
    expect(sealer.open(sealed, NOW + 600_000)).toBeNull();
  });

  it('opens a value sealed by another node with the same secret, never with another', () => {
    const sealed = new SignInStateSealer(SECRET).seal(CHECKS, NOW + 1000);
    expect(new SignInStateSealer(SECRET).open(sealed, NOW)).toEqual(CHECKS);
    expect(new SignInStateSealer(`${SECRET}!`).open(sealed, NOW)).toBeNull();
    expect(new SignInStateSealer(null).open(sealed, NOW)).toBeNull();
  });

  it('opens no value a client changed, cut or made up', () => {
    const sealer = new SignInStateSealer(SECRET);
    const bytes = Buffer.from(sealer.seal(CHECKS, NOW + 1000), 'base64url');
    for (let index = 0; index < bytes.length; index += 7) {
      const changed = Buffer.from(bytes);
      changed[index] ^= 1;
      expect(sealer.open(changed.toString('base64url'), NOW)).toBeNull();
    }
    expect(sealer.open(bytes.subarray(0, -1).toString('base64url'), NOW)).toBeNull();
    expect(sealer.open('', NOW)).toBeNull();
    expect(sealer.open('A'.repeat(300), NOW)).toBeNull();
  });
});
