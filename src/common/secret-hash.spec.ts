import { hashSecret, isSecretHash, plainSecretsEqual, verifySecret } from './secret-hash';

// A low cost keeps the suite quick; the format and the comparison are what is under test.
const CHEAP = { N: 1024, r: 8, p: 1 };

describe('secret hashes (scrypt$N$r$p$salt$hash)', () => {
  it('hashes in a self-describing format with a fresh salt each time', async () => {
    const first = await hashSecret('correct horse', CHEAP);
    const second = await hashSecret('correct horse', CHEAP);
    expect(first).toMatch(/^scrypt\$1024\$8\$1\$[A-Za-z0-9+/]+=*\$[A-Za-z0-9+/]+=*$/);
    expect(first).not.toBe(second);
    expect(isSecretHash(first)).toBe(true);
  });

  it('uses the default cost when none is given', async () => {
    expect(await hashSecret('x')).toMatch(/^scrypt\$32768\$8\$1\$/);
  });

  it('verifies the right secret and rejects a wrong one', async () => {
    const hash = await hashSecret('correct horse', CHEAP);
    await expect(verifySecret('correct horse', hash)).resolves.toBe(true);
    await expect(verifySecret('correct horsf', hash)).resolves.toBe(false);
    await expect(verifySecret('', hash)).resolves.toBe(false);
  });

  it('rejects malformed or unreasonable hashes instead of throwing', async () => {
    const hash = await hashSecret('s', CHEAP);
    for (const bad of [
      'plain-text-password',
      hash.replace('scrypt$', 'bcrypt$'),
      hash.replace('$1024$', '$1000$'), // N not a power of two
      hash.replace('$1024$', `$${2 ** 24}$`), // too costly
      hash.replace(/\$[^$]+$/, '$AAAA'), // hash too short
    ]) {
      expect(isSecretHash(bad)).toBe(false);
      await expect(verifySecret('s', bad)).resolves.toBe(false);
    }
  });

  it('compares plain secrets of any lengths', () => {
    expect(plainSecretsEqual('admin-pass', 'admin-pass')).toBe(true);
    expect(plainSecretsEqual('admin-pass', 'admin-pasS')).toBe(false);
    expect(plainSecretsEqual('admin', 'admin-pass')).toBe(false);
    expect(plainSecretsEqual('', 'admin-pass')).toBe(false);
  });
});
