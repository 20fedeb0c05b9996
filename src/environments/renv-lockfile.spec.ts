import { ApiError } from '../common/api-error';
import {
  lockfileDigest,
  MAX_LOCKED_PACKAGES,
  MAX_LOCKFILE_BYTES,
  parseLockfile,
} from './renv-lockfile';

const CRAN = { Name: 'CRAN', URL: 'https://cran.example.org' };

function lockfile(packages: Record<string, unknown>, r: Record<string, unknown> = {}): Buffer {
  return Buffer.from(
    JSON.stringify({ R: { Version: '4.3.2', Repositories: [CRAN], ...r }, Packages: packages }),
  );
}

function refusal(bytes: Buffer): { status: number; message: string } {
  try {
    parseLockfile(bytes);
  } catch (error) {
    if (error instanceof ApiError) {
      return { status: error.getStatus(), message: error.message };
    }
    throw error;
  }
  throw new Error('the lockfile was taken');
}

const entry = (name: string, version: string, extra: Record<string, unknown> = {}) => ({
  Package: name,
  Version: version,
  Source: 'Repository',
  Repository: 'CRAN',
  ...extra,
});

describe('parseLockfile', () => {
  it("keeps the fields svc uses, sorted by name, and ignores renv's others", () => {
    const parsed = parseLockfile(
      Buffer.from(
        JSON.stringify({
          R: { Version: '4.3.2', Repositories: [CRAN], Extra: 1 },
          Bioconductor: { Version: '3.18' },
          Packages: {
            zeta: entry('zeta', '1.0-2', { Requirements: ['alpha', 'stats', 'MASS'] }),
            alpha: entry('alpha', '2.0.1', {
              Hash: 'a'.repeat(32),
              RemoteSha: 'whatever',
              NeedsCompilation: 'no',
            }),
          },
        }),
      ),
    );
    expect(parsed).toEqual({
      rVersion: '4.3.2',
      repositories: [{ name: 'CRAN', url: 'https://cran.example.org' }],
      packages: [
        {
          name: 'alpha',
          version: '2.0.1',
          repository: 'CRAN',
          hash: 'a'.repeat(32),
          requirements: [],
        },
        {
          name: 'zeta',
          version: '1.0-2',
          repository: 'CRAN',
          hash: null,
          requirements: ['MASS', 'alpha', 'stats'],
        },
      ],
    });
    // The digest is of what svc keeps: a field it ignores does not change it.
    const again = parseLockfile(
      lockfile({
        zeta: entry('zeta', '1.0-2', { Requirements: ['alpha', 'stats', 'MASS'] }),
        alpha: entry('alpha', '2.0.1', { Hash: 'a'.repeat(32) }),
      }),
    );
    expect(lockfileDigest(again)).toBe(lockfileDigest(parsed));
  });

  it.each([
    [
      'a name with a path',
      { '../etc': entry('../etc', '1.0') },
      /Packages: "\.\.\/etc" is not an R package name/,
    ],
    [
      'a name with shell characters',
      { 'a;rm -rf': entry('a;rm -rf', '1.0') },
      /"a;rm -rf" is not an R package name/,
    ],
    ['a name ending with a dot', { 'ab.': entry('ab.', '1.0') }, /"ab\." is not an R package name/],
    ['a name starting with a digit', { '1ab': entry('1ab', '1.0') }, /"1ab" is not/],
    [
      'a one-part version',
      { abc: entry('abc', '1') },
      /Packages\.abc: Version "1" is not an R package version/,
    ],
    ['a version with letters', { abc: entry('abc', '1.0a') }, /Packages\.abc: Version "1\.0a"/],
    ['a version with a path', { abc: entry('abc', '1.0/../../x') }, /Packages\.abc: Version/],
    [
      'a Package field that differs',
      { abc: entry('abd', '1.0') },
      /Packages\.abc: its Package field says "abd"/,
    ],
    [
      'a GitHub source',
      { abc: entry('abc', '1.0', { Source: 'GitHub' }) },
      /Packages\.abc: Source "GitHub" is not taken/,
    ],
    [
      'an unknown repository name',
      { abc: entry('abc', '1.0', { Repository: 'Other' }) },
      /Packages\.abc: Repository "Other" is not one of R\.Repositories/,
    ],
    [
      'a base package',
      { stats: entry('stats', '4.3.2') },
      /Packages\.stats: stats is part of R itself/,
    ],
    [
      'a requirement with shell characters',
      { abc: entry('abc', '1.0', { Requirements: ['$(id)'] }) },
      /Packages\.abc\.Requirements: "\$\(id\)" is not an R package name/,
    ],
    [
      'a hash that is not hexadecimal',
      { abc: entry('abc', '1.0', { Hash: 'zz' }) },
      /Packages\.abc: Hash "zz"/,
    ],
    ['an entry that is not an object', { abc: 'x' }, /Packages\.abc must be an object/],
  ])('refuses %s with a 400 naming the entry', (_what, packages, message) => {
    const { status, message: text } = refusal(lockfile(packages));
    expect(status).toBe(400);
    expect(text).toMatch(message);
  });

  it('refuses an incomplete lockfile, naming the package and what it lacks', () => {
    const { status, message } = refusal(
      lockfile({
        abc: entry('abc', '1.0', { Requirements: ['missing.one', 'utils', 'lattice', 'other'] }),
      }),
    );
    expect(status).toBe(400);
    expect(message).toBe(
      'renv.lock: Packages.abc requires missing.one, other, which the lockfile does not lock (a lockfile is complete: every requirement locked, or part of R)',
    );
  });

  it('refuses repositories that are not URLs, and names given twice', () => {
    expect(refusal(lockfile({}, { Repositories: [{ Name: 'x', URL: '/etc' }] })).message).toMatch(
      /R\.Repositories\[0\] \(x\): "\/etc" is not an http\(s\):\/\/ or file:\/\/ URL/,
    );
    expect(refusal(lockfile({}, { Repositories: [CRAN, CRAN] })).message).toMatch(
      /R\.Repositories\[1\]: the repository CRAN is named twice/,
    );
    expect(refusal(lockfile({}, { Version: '4.3; echo' })).message).toMatch(
      /R\.Version "4\.3; echo"/,
    );
  });

  it('bounds the size and the count before and as it reads', () => {
    expect(refusal(Buffer.alloc(MAX_LOCKFILE_BYTES + 1, 0x20)).status).toBe(413);
    const many = Object.fromEntries(
      Array.from({ length: MAX_LOCKED_PACKAGES + 1 }, (_, i) => [`p${i}`, { Version: '1.0' }]),
    );
    expect(refusal(lockfile(many)).message).toMatch(/Packages locks 2001 packages; at most 2000/);
    expect(refusal(Buffer.from('{"Packages": ')).message).toMatch(/^renv\.lock: not JSON/);
    expect(refusal(Buffer.from('[1]')).message).toMatch(/must be a JSON object/);
  });

  it('shows a hostile value short and on one line', () => {
    const { message } = refusal(lockfile({ abc: entry('abc', `1\n${'9'.repeat(500)}`) }));
    expect(message).not.toContain('\n');
    expect(message.length).toBeLessThan(300);
  });
});
