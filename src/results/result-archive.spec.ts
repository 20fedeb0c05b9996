import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { explodeZip } from '../jobs/job-archive';
import type { ZipLimits } from '../job-core/job-input';
import * as yauzl from 'yauzl';
import { listZipEntryNames } from '../common/zip-reader';
import { worthDeflating, zipFiles, zipFilesToBufferOrFile } from './result-archive';
import { makeZip, makeZipWithRawName } from '../../test/support/zip-fixtures';

const LIMITS: ZipLimits = {
  maxEntries: 100,
  maxUncompressedBytes: 100 * 1024 * 1024,
  maxCompressionRatio: 10_000,
};

describe('result archive', () => {
  let dir: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'svc-result-archive-'));
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function put(
    name: string,
    content: string | Buffer,
  ): Promise<{ name: string; path: string }> {
    const path = join(dir, name);
    await writeFile(path, content);
    return { name, path };
  }

  describe('zipFiles', () => {
    it('zips files from disk, sorted by name, and round-trips through explodeZip', async () => {
      const binary = randomBytes(64 * 1024);
      const files = [
        await put('result.pdf', binary),
        await put('B.csv', 'b'),
        await put('a.csv', 'a,b\n1,2\n'),
        await put('empty.txt', ''),
        await put('Zürich.txt', 'ü'),
      ];
      const zip = await zipFiles(files);

      // Code-unit order: upper case before lower case, non-ASCII last.
      expect(await listZipEntryNames(zip)).toEqual([
        'B.csv',
        'Zürich.txt',
        'a.csv',
        'empty.txt',
        'result.pdf',
      ]);
      const exploded = await explodeZip(zip, LIMITS);
      expect(exploded.map((f) => f.name)).toEqual([
        'B.csv',
        'Zürich.txt',
        'a.csv',
        'empty.txt',
        'result.pdf',
      ]);
      const byName = new Map(exploded.map((f) => [f.name, f.content]));
      expect(byName.get('result.pdf')?.equals(binary)).toBe(true);
      expect(byName.get('a.csv')?.toString()).toBe('a,b\n1,2\n');
      expect(byName.get('empty.txt')?.length).toBe(0);
      expect(byName.get('Zürich.txt')?.toString()).toBe('ü');
    });

    it('gives the same entry order whatever the input order', async () => {
      const files = [await put('c.txt', 'c'), await put('a.txt', 'a'), await put('b.txt', 'b')];
      const one = await listZipEntryNames(await zipFiles(files));
      const two = await listZipEntryNames(await zipFiles([...files].reverse()));
      expect(one).toEqual(['a.txt', 'b.txt', 'c.txt']);
      expect(two).toEqual(one);
    });

    it('may name entries differently from the files on disk', async () => {
      const file = await put('on-disk.bin', 'x');
      const zip = await zipFiles([{ name: 'in-archive.txt', path: file.path }]);
      expect(await listZipEntryNames(zip)).toEqual(['in-archive.txt']);
    });

    it('makes a valid empty archive for no files', async () => {
      const zip = await zipFiles([]);
      expect(await listZipEntryNames(zip)).toEqual([]);
      await expect(explodeZip(zip, LIMITS)).resolves.toEqual([]);
    });

    it('compresses (a large repetitive file shrinks)', async () => {
      const file = await put('big.csv', '1,2,3\n'.repeat(100_000));
      const zip = await zipFiles([file]);
      expect(zip.length).toBeLessThan(60_000);
    });

    it('stores already-compressed formats and tiny files as they are, deflates the rest', async () => {
      const text = 'x,y\n'.repeat(5_000);
      // Above the size up to which files are read whole: this one is streamed from disk.
      const large = '1,2,3\n'.repeat(300_000);
      const files = [
        await put('plot.pdf', text),
        await put('photo.JPG', text),
        await put('tiny.csv', 'x,y\n1,2\n'),
        await put('table.csv', text),
        await put('large.csv', large),
      ];
      const zip = await zipFiles(files);
      const zipfile = await yauzl.fromBufferPromise(zip, { lazyEntries: true });
      const methods: Record<string, number> = {};
      for await (const entry of zipfile.eachEntry()) {
        methods[entry.fileName] = entry.compressionMethod;
      }
      // 0: stored, 8: deflated.
      expect(methods).toEqual({
        'large.csv': 8,
        'photo.JPG': 0,
        'plot.pdf': 0,
        'table.csv': 8,
        'tiny.csv': 0,
      });
      const exploded = new Map((await explodeZip(zip, LIMITS)).map((f) => [f.name, f.content]));
      expect(exploded.get('plot.pdf')?.toString()).toBe(text);
      expect(exploded.get('large.csv')?.toString()).toBe(large);
      expect(worthDeflating('archive.tar.gz', 10_000)).toBe(false);
      expect(worthDeflating('model.RData', 10_000)).toBe(false);
      expect(worthDeflating('noextension', 10_000)).toBe(true);
    });

    it('fails when a file cannot be read', async () => {
      await expect(
        zipFiles([{ name: 'missing.txt', path: join(dir, 'missing.txt') }]),
      ).rejects.toThrow(/ENOENT/);
    });

    it('fails when a path is a directory', async () => {
      await expect(zipFiles([{ name: 'dir', path: dir }])).rejects.toThrow(/not a file/);
    });

    it('refuses the same entry name twice', async () => {
      const file = await put('a.txt', 'a');
      await expect(zipFiles([file, { ...file }])).rejects.toThrow(/given twice/);
    });
  });

  describe('zipFilesToBufferOrFile', () => {
    const MiB = 1024 * 1024;
    const spill = (name: string) => ({
      path: join(dir, 'spill', name),
      inlineMaxBytes: MiB,
      makeDirectory: () => mkdir(join(dir, 'spill'), { recursive: true }),
    });

    it('keeps files totalling up to the limit in memory', async () => {
      const zipped = await zipFilesToBufferOrFile(
        [await put('a.bin', randomBytes(MiB))],
        spill('a.zip'),
      );
      expect('data' in zipped && (await listZipEntryNames(zipped.data))).toEqual(['a.bin']);
    });

    it('writes a larger archive to the file, with its size and SHA-256', async () => {
      const big = randomBytes(2 * MiB);
      const zipped = await zipFilesToBufferOrFile([await put('big.bin', big)], spill('big.zip'));
      if ('data' in zipped) {
        throw new Error('expected a file');
      }
      const onDisk = await readFile(zipped.path);
      expect(zipped.size).toBe(onDisk.length);
      expect(zipped.sha256).toBe(createHash('sha256').update(onDisk).digest('hex'));
      const [entry] = await explodeZip(onDisk, LIMITS);
      expect(entry.content.equals(big)).toBe(true);
    });

    it('reads back and removes an archive that compressed below the limit', async () => {
      const zipped = await zipFilesToBufferOrFile(
        [await put('zeros.csv', Buffer.alloc(3 * MiB))],
        spill('zeros.zip'),
      );
      expect('data' in zipped && zipped.data.length).toBeLessThan(MiB);
      expect(await readdir(join(dir, 'spill'))).toEqual([]);
    });
  });

  describe('listZipEntryNames', () => {
    it('lists names in archive order, directories included', async () => {
      const zip = await makeZip([
        { name: 'b.txt', content: 'b' },
        { name: 'dir/', content: '' },
        { name: 'dir/a.txt', content: 'a' },
      ]);
      expect(await listZipEntryNames(zip)).toEqual(['b.txt', 'dir/', 'dir/a.txt']);
    });

    it('reports hostile names as stored, without refusing them', async () => {
      expect(await listZipEntryNames(await makeZipWithRawName('../x.R', 'x'))).toEqual(['../x.R']);
      expect(await listZipEntryNames(await makeZipWithRawName('a\\b.R', 'x'))).toEqual(['a\\b.R']);
    });

    it('rejects what is not a ZIP archive', async () => {
      await expect(listZipEntryNames(Buffer.from('nope'))).rejects.toThrow();
    });
  });
});
