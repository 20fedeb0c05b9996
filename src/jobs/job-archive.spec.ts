import { randomBytes } from 'node:crypto';
import { createInflateRaw, type InflateRaw } from 'node:zlib';
import { HttpStatus } from '@nestjs/common';
import { ApiError } from '../common/api-error';
import { explodeZip, isZipUpload, validateJobFiles } from './job-archive';
import type { ZipLimits } from '../job-core/job-input';
import type { JobFileContent, JobFileInput } from '../queue/queue.types';
import {
  makeZip,
  makeZipBomb,
  makeRawStoredZip,
  makeZipWithRawName,
  patchEntry,
} from '../../test/support/zip-fixtures';

const LIMITS: ZipLimits = {
  maxEntries: 100,
  maxUncompressedBytes: 10 * 1024 * 1024,
  maxCompressionRatio: 1000,
};

/** The ApiError a promise rejects with (fails the test if it resolves or rejects otherwise). */
async function apiErrorOf(promise: Promise<unknown>): Promise<ApiError> {
  const err: unknown = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiError);
  return err as ApiError;
}

/**
 * Counts the bytes every raw inflate stream produces from now on (yauzl inflates entries with
 * zlib's InflateRaw): how much of an archive was expanded, whatever the machine's speed. push()
 * is watched, not 'data': a listener would keep the stream flowing after its reader stopped.
 */
function countInflatedBytes(): { bytes: () => number; restore: () => void } {
  const prototype = Object.getPrototypeOf(createInflateRaw()) as InflateRaw;
  const push = jest.spyOn(prototype, 'push');
  return {
    bytes: () =>
      push.mock.calls.reduce((sum, [chunk]) => sum + ((chunk as Buffer | null)?.length ?? 0), 0),
    restore: () => push.mockRestore(),
  };
}

async function expectRejected(
  zip: Buffer,
  status: HttpStatus,
  message: RegExp,
  limits: ZipLimits = LIMITS,
): Promise<void> {
  const err = await apiErrorOf(explodeZip(zip, limits));
  expect(err.getStatus()).toBe(status);
  expect(err.message).toMatch(message);
}

function byName(files: JobFileContent[]): Record<string, string> {
  return Object.fromEntries(files.map((f) => [f.name, f.content.toString('utf8')]));
}

describe('explodeZip', () => {
  describe('accepts', () => {
    it('a flat archive, with contents intact and in archive order', async () => {
      const zip = await makeZip([
        { name: 'script.R', content: 'x <- 1\n' },
        { name: 'data.csv', content: 'a,b\n1,2\n' },
        { name: 'configuration.txt', content: 'rScript = foo.R\n' },
      ]);
      const files = await explodeZip(zip, LIMITS);
      expect(files.map((f) => f.name)).toEqual(['script.R', 'data.csv', 'configuration.txt']);
      expect(byName(files)).toEqual({
        'script.R': 'x <- 1\n',
        'data.csv': 'a,b\n1,2\n',
        'configuration.txt': 'rScript = foo.R\n',
      });
    });

    it('stored (uncompressed) entries and binary content', async () => {
      const binary = Buffer.from([0, 1, 2, 255, 254, 0x50, 0x4b, 3, 4]);
      const zip = await makeZip([
        { name: 'plain.txt', content: 'hello', compress: false },
        { name: 'blob.bin', content: binary },
      ]);
      const files = await explodeZip(zip, LIMITS);
      expect(files[0].content.toString()).toBe('hello');
      expect(files[1].content.equals(binary)).toBe(true);
    });

    it('an empty file', async () => {
      const files = await explodeZip(await makeZip([{ name: 'empty.txt', content: '' }]), LIMITS);
      expect(files).toEqual([{ name: 'empty.txt', content: Buffer.alloc(0) }]);
    });

    it('an archive with no entries (a job may run a catalog script without data)', async () => {
      await expect(explodeZip(await makeZip([]), LIMITS)).resolves.toEqual([]);
    });

    it('unicode and odd-but-harmless names', async () => {
      const names = [
        'données été.csv',
        '日本語.txt',
        'ab:c.txt',
        '.hidden',
        'x..y.R',
        '#1 & $2.txt',
      ];
      const zip = await makeZip(names.map((name) => ({ name, content: name })));
      const files = await explodeZip(zip, LIMITS);
      expect(files.map((f) => f.name)).toEqual(names);
      expect(files.map((f) => f.content.toString())).toEqual(names);
    });

    it('several .R files (that rule belongs to validateJobFiles)', async () => {
      const zip = await makeZip([
        { name: 'a.R', content: '1' },
        { name: 'b.r', content: '2' },
      ]);
      await expect(explodeZip(zip, LIMITS)).resolves.toHaveLength(2);
    });

    it('an archive exactly at every limit', async () => {
      const zip = await makeZip([
        { name: 'a.txt', content: 'abcd', compress: false },
        { name: 'b.txt', content: 'efgh', compress: false },
      ]);
      const limits = { maxEntries: 2, maxUncompressedBytes: 8, maxCompressionRatio: 1 };
      await expect(explodeZip(zip, limits)).resolves.toHaveLength(2);
    });
  });

  describe('drops macOS junk', () => {
    it('__MACOSX/ entries and a top-level .DS_Store', async () => {
      const zip = await makeZip([
        { name: 'script.R', content: 'x' },
        { name: '__MACOSX/', content: '' },
        { name: '__MACOSX/._script.R', content: 'resource fork' },
        { name: '.DS_Store', content: 'finder' },
      ]);
      const files = await explodeZip(zip, LIMITS);
      expect(files.map((f) => f.name)).toEqual(['script.R']);
    });

    it('but still refuses escapes hidden under __MACOSX/', async () => {
      const zip = await makeZipWithRawName('__MACOSX/../../x.R', 'x');
      await expectRejected(zip, HttpStatus.BAD_REQUEST, /"\.\." segment/);
    });

    it('and does not count junk towards the size limit', async () => {
      const zip = await makeZip([
        { name: 'a.txt', content: 'abc' },
        { name: '__MACOSX/._a.txt', content: 'x'.repeat(1000) },
      ]);
      const limits = { ...LIMITS, maxUncompressedBytes: 10 };
      await expect(explodeZip(zip, limits)).resolves.toHaveLength(1);
    });
  });

  describe('refuses with 400', () => {
    it.each([
      ['an empty body', Buffer.alloc(0), /body is empty/],
      ['text', Buffer.from('this is not a zip archive at all'), /not a ZIP archive/],
      ['JSON', Buffer.from('{"a":1}'), /not a ZIP archive/],
      [
        'random bytes',
        Buffer.from(Array.from({ length: 300 }, (_, i) => (i * 37) % 256)),
        /not a ZIP/,
      ],
    ])('%s', async (_what, body, message) => {
      await expectRejected(body, HttpStatus.BAD_REQUEST, message);
    });

    it('a truncated archive', async () => {
      const zip = await makeZip([{ name: 'a.txt', content: 'hello world' }]);
      await expectRejected(zip.subarray(0, zip.length - 30), HttpStatus.BAD_REQUEST, /ZIP/);
    });

    it('an archive whose central directory is damaged', async () => {
      const zip = await makeZip([{ name: 'a.txt', content: 'hello world' }]);
      const damaged = Buffer.from(zip);
      const central = damaged.indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]));
      damaged.writeUInt32LE(0xdeadbeef, central);
      await expectRejected(damaged, HttpStatus.BAD_REQUEST, /corrupt/);
    });

    it('an entry whose data was damaged (CRC mismatch)', async () => {
      const zip = await makeZip([{ name: 'a.txt', content: 'hello world', compress: false }]);
      const damaged = Buffer.from(zip);
      const at = damaged.indexOf('hello world');
      damaged.write('HELLO', at);
      await expectRejected(damaged, HttpStatus.BAD_REQUEST, /"a\.txt" fails its CRC check/);
    });

    it.each([
      ['dir/a.R', 'a file in a sub-directory'],
      ['dir/', 'a directory entry'],
      ['a/b/c.csv', 'a deeply nested file'],
      ['./a.R', 'a "./" prefix'],
    ])('%s (%s): nested directories are not supported', async (name) => {
      const zip = name.endsWith('/')
        ? await makeZip([{ name, content: '' }])
        : await makeZip([{ name, content: 'x' }]);
      await expectRejected(zip, HttpStatus.BAD_REQUEST, /nested directories are not supported/);
    });

    it('a flat file next to a directory entry', async () => {
      const zip = await makeZip([
        { name: 'a.R', content: 'x' },
        { name: 'results/', content: '' },
      ]);
      await expectRejected(zip, HttpStatus.BAD_REQUEST, /"results\/".*nested directories/);
    });

    it.each([
      ['../x.R', /"\.\." segment/],
      ['../../etc/passwd', /"\.\." segment/],
      ['..', /"\.\." segment/],
      ['/abs.R', /absolute path/],
      ['/', /absolute path/],
      ['a\\b.R', /backslash/],
      ['..\\x.R', /backslash/],
      ['C:x.R', /drive letter/],
      ['c:/x.R', /drive letter/],
      ['a\u0000.R', /control characters/],
      ['a\n.R', /control characters/],
      ['a\u007f.R', /control characters/],
    ])('an entry named %j', async (name, message) => {
      const zip = await makeZipWithRawName(name, 'x <- 1');
      await expectRejected(zip, HttpStatus.BAD_REQUEST, message);
    });

    it('an entry named "."', async () => {
      await expectRejected(
        await makeZipWithRawName('.', 'x'),
        HttpStatus.BAD_REQUEST,
        /not a file name/,
      );
    });

    it('an entry with an empty name', async () => {
      const zip = makeRawStoredZip([
        { name: 'a.csv', content: '1' },
        { name: '', content: '2' },
      ]);
      await expectRejected(zip, HttpStatus.BAD_REQUEST, /name is empty/);
    });

    it('an entry name longer than 255 bytes', async () => {
      const zip = await makeZip([{ name: `${'é'.repeat(128)}.csv`, content: 'x' }]);
      await expectRejected(zip, HttpStatus.BAD_REQUEST, /longer than 255 bytes/);
    });

    it('a name given twice', async () => {
      const zip = await makeZip([
        { name: 'a.csv', content: '1' },
        { name: 'b.csv', content: '2' },
      ]);
      // Give the second entry the first one's name (same length, so a byte patch suffices).
      const twice = patchEntry(zip, 1, { nameBytes: Buffer.from('a.csv') });
      await expectRejected(twice, HttpStatus.BAD_REQUEST, /"a\.csv" more than once/);
    });

    it('an encrypted entry', async () => {
      const zip = patchEntry(await makeZip([{ name: 'secret.csv', content: 'x'.repeat(50) }]), 0, {
        setFlags: 0x1,
      });
      await expectRejected(zip, HttpStatus.BAD_REQUEST, /"secret\.csv" is encrypted/);
    });

    it('an unsupported compression method', async () => {
      const zip = patchEntry(await makeZip([{ name: 'a.csv', content: 'x'.repeat(50) }]), 0, {
        compressionMethod: 12, // bzip2
      });
      await expectRejected(zip, HttpStatus.BAD_REQUEST, /compression method 12/);
    });

    it('an entry whose declared size is smaller than its real size (lying header)', async () => {
      // 5 MB of zeros claiming to be 1 KB: under every declared limit, but not what it inflates to.
      const zip = patchEntry(await makeZipBomb(5 * 1024 * 1024), 0, { uncompressedSize: 1024 });
      const err = await apiErrorOf(explodeZip(zip, LIMITS));
      expect(err.getStatus()).toBe(HttpStatus.BAD_REQUEST);
      expect(err.message).toMatch(/corrupt/);
    });

    it('an entry whose declared size is larger than its real size', async () => {
      const zip = patchEntry(await makeZip([{ name: 'a.csv', content: 'x'.repeat(100) }]), 0, {
        uncompressedSize: 150,
      });
      await expectRejected(zip, HttpStatus.BAD_REQUEST, /corrupt/);
    });
  });

  describe('refuses with 413', () => {
    it('more entries than allowed', async () => {
      const zip = await makeZip(
        Array.from({ length: 4 }, (_, i) => ({ name: `f${i}.txt`, content: String(i) })),
      );
      await expectRejected(zip, HttpStatus.PAYLOAD_TOO_LARGE, /has 4 entries; at most 3/, {
        ...LIMITS,
        maxEntries: 3,
      });
    });

    it('counts macOS junk towards the entry limit', async () => {
      const zip = await makeZip([
        { name: 'a.txt', content: 'a' },
        { name: '__MACOSX/._a.txt', content: 'x' },
      ]);
      await expectRejected(zip, HttpStatus.PAYLOAD_TOO_LARGE, /entries/, {
        ...LIMITS,
        maxEntries: 1,
      });
    });

    it('a total declared size over the limit', async () => {
      const zip = await makeZip([
        { name: 'a.txt', content: 'x'.repeat(600), compress: false },
        { name: 'b.txt', content: 'y'.repeat(600), compress: false },
      ]);
      await expectRejected(zip, HttpStatus.PAYLOAD_TOO_LARGE, /more than 1000 bytes/, {
        ...LIMITS,
        maxUncompressedBytes: 1000,
      });
    });

    it('a ZIP bomb: 50 MB of zeros with a low ratio limit', async () => {
      const zip = await makeZipBomb(50 * 1024 * 1024);
      expect(zip.length).toBeLessThan(100 * 1024);
      await expectRejected(zip, HttpStatus.PAYLOAD_TOO_LARGE, /"bomb\.csv".*ZIP bomb/, {
        maxEntries: 10,
        maxUncompressedBytes: 1024 * 1024 * 1024,
        maxCompressionRatio: 100,
      });
    });

    it('a ZIP bomb whose header lies about its size: the real bytes are counted', async () => {
      // Declares 1 MB (ratio ~20, allowed) but inflates to 50 MB.
      const zip = patchEntry(await makeZipBomb(50 * 1024 * 1024), 0, {
        uncompressedSize: 1024 * 1024,
      });
      const inflation = countInflatedBytes();
      try {
        const err = await apiErrorOf(
          explodeZip(zip, {
            maxEntries: 10,
            maxUncompressedBytes: 2 * 1024 * 1024,
            maxCompressionRatio: 100,
          }),
        );
        // Refused (as corrupt or as too large) without inflating the whole 50 MB: inflation
        // stopped within a few buffers of the 2 MB limit.
        expect([HttpStatus.BAD_REQUEST, HttpStatus.PAYLOAD_TOO_LARGE]).toContain(err.getStatus());
        expect(inflation.bytes()).toBeGreaterThan(1024 * 1024);
        expect(inflation.bytes()).toBeLessThan(4 * 1024 * 1024);
      } finally {
        inflation.restore();
      }
    });

    it('a stored entry with zero compressed bytes that claims content', async () => {
      const zip = patchEntry(await makeZip([{ name: 'a.txt', content: '' }]), 0, {
        uncompressedSize: 10,
      });
      // Deflated empty content is a couple of bytes, so claiming 10 bytes is a high ratio or a lie.
      const err = await apiErrorOf(explodeZip(zip, { ...LIMITS, maxCompressionRatio: 2 }));
      expect([HttpStatus.BAD_REQUEST, HttpStatus.PAYLOAD_TOO_LARGE]).toContain(err.getStatus());
    });
  });

  it('refuses the archive when only its last entry is bad', async () => {
    const zip = await makeZip([
      { name: 'big.csv', content: randomBytes(1024 * 1024) },
      { name: 'dir/late.R', content: 'x' },
    ]);
    await expectRejected(zip, HttpStatus.BAD_REQUEST, /nested directories/);
  });
});

describe('validateJobFiles', () => {
  const file = (name: string): JobFileInput => ({ name, content: Buffer.from(name) });

  function expect400(files: JobFileInput[], message: RegExp): void {
    let caught: unknown;
    try {
      validateJobFiles(files);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ApiError);
    expect((caught as ApiError).getStatus()).toBe(HttpStatus.BAD_REQUEST);
    expect((caught as ApiError).message).toMatch(message);
  }

  it('accepts plain names with at most one R script', () => {
    expect(() => validateJobFiles([])).not.toThrow();
    expect(() =>
      validateJobFiles([file('a.R'), file('data.csv'), file('configuration.txt'), file('x.Rdata')]),
    ).not.toThrow();
    expect(() => validateJobFiles([file('report.Rnw'), file('a.r')])).not.toThrow();
  });

  it.each([[['a.R', 'b.R']], [['a.R', 'b.r']], [['A.r', 'b.csv', 'c.r']]])(
    'refuses more than one R script %j, naming them',
    (names) => {
      const scripts = names.filter((n) => /\.r$/i.test(n));
      expect400(
        names.map(file),
        new RegExp(
          `at most one R script.*${scripts.map((s) => `"${s.replace('.', '\\.')}"`).join(', ')}`,
        ),
      );
    },
  );

  it.each([
    ['', /empty/],
    ['.', /not a file name/],
    ['..', /not a file name/],
    ['dir/a.csv', /path separator/],
    ['a\\b.csv', /path separator/],
    ['/abs.csv', /path separator/],
    ['a\u0000b', /control characters/],
    ['tab\there', /control characters/],
    ['x'.repeat(256), /longer than 255 bytes/],
    ['é'.repeat(128), /longer than 255 bytes/],
  ])('refuses the name %j', (name, message) => {
    expect400([file(name)], message);
  });

  it('accepts a name of exactly 255 bytes', () => {
    expect(() => validateJobFiles([file('x'.repeat(255))])).not.toThrow();
  });

  it('refuses duplicates', () => {
    expect400([file('a.csv'), file('b.csv'), file('a.csv')], /"a\.csv" more than once/);
  });
});

describe('isZipUpload', () => {
  it.each([
    ['data.zip', 'application/octet-stream', true],
    ['DATA.ZIP', 'application/octet-stream', true],
    ['archive', 'application/zip', true],
    ['archive', 'application/x-zip', true],
    ['archive', 'Application/X-Zip-Compressed; name=x', true],
    ['data.csv', 'text/csv', false],
    ['zip.csv', 'application/octet-stream', false],
  ])('%s sent as %s is a ZIP: %s', (originalName, mimeType, expected) => {
    expect(isZipUpload(originalName, mimeType)).toBe(expected);
  });
});
