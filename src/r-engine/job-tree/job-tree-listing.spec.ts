import { appendFileSync, existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import {
  BLOCKING_TIMEOUT_MS,
  makeDeepTree,
  makeFifo,
  useHostileTree,
} from '../../../test/support/job-tree-fixtures';
import { zipFiles } from '../../results/result-archive';
import { zipEntries } from '../../../test/support/zip-fixtures';
import { JobOutputError } from './job-tree';
import { bytesUnder, listOutputFiles, type OutputLimits } from './job-tree-listing';
import { removeTree } from './job-tree-removal';

const LIMITS: OutputLimits = {
  exclude: new Set(['config.txt', 'out.log']),
  maxEntries: 10_000,
  maxDepth: 64,
  maxPathBytes: 4096,
};

describe('job tree listing', () => {
  const fixture = useHostileTree();
  let base: string;
  let root: string;
  let canary: string;
  beforeEach(() => {
    ({ base, root, canary } = fixture);
  });
  const plantHostileTree = (): Promise<boolean> => fixture.plantHostileTree();

  describe('listOutputFiles', () => {
    it(
      'lists regular files only: links, FIFOs, sockets and device nodes are left out, not followed',
      async () => {
        const device = await plantHostileTree();
        const tree = await listOutputFiles(root, LIMITS);
        try {
          expect(tree.files.map((file) => [file.path, file.size]).sort()).toEqual([
            ['plots/deeper/x.csv', 4],
            ['plots/hard-link.txt', 6],
            ['result.txt', 6],
          ]);
          const skipped = tree.skipped.map((entry) => `${entry.kind} ${entry.path}`).sort();
          expect(skipped).toEqual(
            [
              'FIFO fifo',
              'FIFO plots/fifo',
              'socket socket',
              'symbolic link canary-dir',
              'symbolic link environ',
              'symbolic link plots/deeper/nested-dir',
              'symbolic link plots/nested-link.txt',
              'symbolic link secret-link.txt',
              ...(device ? ['device node null-device'] : []),
            ].sort(),
          );
          expect(tree.skippedCount).toBe(skipped.length);
          const contents = await Promise.all(
            tree.files.map(async (file) => {
              const handle = await tree.open(file);
              try {
                return (await handle.readFile()).toString();
              } finally {
                await handle.close();
              }
            }),
          );
          expect(contents.sort()).toEqual(['result', 'result', 'x\n1\n']);
        } finally {
          await tree.close();
        }
      },
      BLOCKING_TIMEOUT_MS,
    );

    it(
      'refuses to open a listed file that became a link, a FIFO or a directory',
      async () => {
        for (const name of ['a.txt', 'b.txt', 'c.txt']) {
          writeFileSync(join(root, name), name);
        }
        const tree = await listOutputFiles(root, LIMITS);
        try {
          await rm(join(root, 'a.txt'));
          symlinkSync(join(canary, 'secret.txt'), join(root, 'a.txt'));
          await rm(join(root, 'b.txt'));
          makeFifo(join(root, 'b.txt'));
          await rm(join(root, 'c.txt'));
          mkdirSync(join(root, 'c.txt'));
          for (const file of tree.files) {
            await expect(tree.open(file)).rejects.toThrow(JobOutputError);
            await expect(tree.open(file)).rejects.toThrow(`The file "${file.path}" changed`);
          }
        } finally {
          await tree.close();
        }
      },
      BLOCKING_TIMEOUT_MS,
    );

    it('refuses to open a file whose directory became a link to one with the same names', async () => {
      mkdirSync(join(root, 'plots'));
      writeFileSync(join(root, 'plots', 'secret.txt'), 'job');
      const tree = await listOutputFiles(root, LIMITS);
      try {
        await rm(join(root, 'plots'), { recursive: true });
        symlinkSync(canary, join(root, 'plots'));
        await expect(tree.open(tree.files[0])).rejects.toThrow(JobOutputError);
      } finally {
        await tree.close();
      }
    });

    it('zips a file that grew after the listing at its listed size', async () => {
      writeFileSync(join(root, 'small.txt'), 'listed');
      writeFileSync(join(root, 'large.bin'), Buffer.alloc(2 * 1024 * 1024, 1));
      const tree = await listOutputFiles(root, LIMITS);
      try {
        appendFileSync(join(root, 'small.txt'), ' and grown');
        appendFileSync(join(root, 'large.bin'), Buffer.alloc(1024, 2));
        const zip = await zipFiles(
          tree.files.map((file) => ({ ...file, name: file.path, open: () => tree.open(file) })),
        );
        const entries = await zipEntries(zip);
        expect(entries.get('small.txt')?.toString()).toBe('listed');
        expect(entries.get('large.bin')?.length).toBe(2 * 1024 * 1024);
        expect(entries.get('large.bin')?.includes(2)).toBe(false);
      } finally {
        await tree.close();
      }
    });

    it('names a file name that is not UTF-8, escaped', async () => {
      mkdirSync(join(root, 'plots'));
      writeFileSync(
        Buffer.concat([Buffer.from(join(root, 'plots') + '/'), Buffer.from([0x62, 0xff, 0x0a])]),
        'x',
      );
      const listing = listOutputFiles(root, LIMITS);
      await expect(listing).rejects.toThrow(JobOutputError);
      await expect(listing).rejects.toThrow(
        'The file name "plots/b\\xff\\x0a" is not valid UTF-8.',
      );
    });

    it('names a file name with a backslash', async () => {
      writeFileSync(join(root, '..\\up.txt'), 'x');
      await expect(listOutputFiles(root, LIMITS)).rejects.toThrow(
        'The file name "..\\\\up.txt" holds a backslash',
      );
    });

    it('names a path longer than the limit, and removeTree removes it', async () => {
      // 300 levels of 20 bytes: some 6,300 bytes, beyond PATH_MAX.
      makeDeepTree(root, 300, 'd'.repeat(20));
      await expect(listOutputFiles(root, { ...LIMITS, maxDepth: 1000 })).rejects.toThrow(
        /^The path "d{20}\/d{20}\/.*….*d{20}" is longer than 4096 bytes\.$/,
      );
      await expect(listOutputFiles(root, LIMITS)).rejects.toThrow(
        /lies deeper than 64 directories/,
      );
      await removeTree(root);
      expect(existsSync(root)).toBe(false);
    });

    it('refuses more entries than the limit', async () => {
      mkdirSync(join(root, 'many'));
      for (let i = 0; i < 10_000; i += 1) {
        writeFileSync(join(root, 'many', `${i}.txt`), '');
      }
      // 10,001 entries with the directory; the service's own files do not count.
      writeFileSync(join(root, 'out.log'), '');
      await expect(listOutputFiles(root, LIMITS)).rejects.toThrow(
        /^The job wrote more than 10000 files and directories/,
      );
      const tree = await listOutputFiles(root, { ...LIMITS, maxEntries: 10_001 });
      expect(tree.files).toHaveLength(10_000);
      await tree.close();
      // A directory this large is read and removed a batch at a time.
      await removeTree(root);
      expect(existsSync(root)).toBe(false);
    });

    it('throws, without following it, for a root that is a link', async () => {
      const link = join(base, 'link');
      symlinkSync(canary, link);
      await expect(listOutputFiles(link, LIMITS)).rejects.toMatchObject({
        code: expect.stringMatching(/^(ELOOP|ENOTDIR)$/),
      });
    });
  });

  describe('bytesUnder', () => {
    it(
      'counts regular files once, follows no link and never blocks on a FIFO',
      async () => {
        await plantHostileTree();
        writeFileSync(join(canary, 'big.bin'), Buffer.alloc(1024 * 1024));
        fixture.resnapshotCanary();
        symlinkSync(join(canary, 'big.bin'), join(root, 'big-link.bin'));
        const other = join(base, 'other');
        mkdirSync(other);
        writeFileSync(join(other, 'seven.txt'), '1234567');
        // result.txt 6 (its hard link once), config.txt 15 ('’' is 3 bytes), out.log 9, x.csv 4, seven 7.
        expect(await bytesUnder([root, other, join(base, 'missing')])).toBe(6 + 15 + 9 + 4 + 7);
        expect(await bytesUnder([join(root, 'canary-dir')])).toBe(0);
      },
      BLOCKING_TIMEOUT_MS,
    );

    it('throws past its limits', async () => {
      makeDeepTree(root, 5, 'd');
      await expect(bytesUnder([root], { maxEntries: 100, maxDepth: 4 })).rejects.toThrow(
        JobOutputError,
      );
      await expect(bytesUnder([root], { maxEntries: 3, maxDepth: 100 })).rejects.toThrow(
        JobOutputError,
      );
      expect(await bytesUnder([root], { maxEntries: 100, maxDepth: 5 })).toBe(4);
    });
  });
});
