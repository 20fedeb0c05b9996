import { execFileSync, spawn } from 'node:child_process';
import {
  appendFileSync,
  closeSync,
  linkSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
  existsSync,
  constants,
} from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { zipFiles } from '../results/result-archive';
import { zipEntries } from '../../test/support/zip-fixtures';
import {
  bytesUnder,
  describeJobPath,
  emptyDirectory,
  JobOutputError,
  listOutputFiles,
  type OutputLimits,
  removeTree,
} from './job-tree';

/** Node has no mkfifo: the shell's. */
function makeFifo(path: string): void {
  execFileSync('mkfifo', [path]);
}

/** A test that would hang on a FIFO fails fast instead. */
const BLOCKING_TIMEOUT_MS = 10_000;

const LIMITS: OutputLimits = {
  exclude: new Set(['config.txt', 'out.log']),
  maxEntries: 10_000,
  maxDepth: 64,
  maxPathBytes: 4096,
};

/** Every path below `dir` with its content (files) or '/' (directories), for before/after. */
function snapshot(dir: string): Record<string, string> {
  const seen: Record<string, string> = {};
  const walk = (at: string, relative: string): void => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name);
      const name = relative ? `${relative}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        seen[name] = '/';
        walk(path, name);
      } else {
        seen[name] = readFileSync(path, 'utf8');
      }
    }
  };
  walk(dir, '');
  return seen;
}

/**
 * Makes `levels` nested directories named `name` below `root` and a file `leaf.txt` at the
 * bottom, through descriptors (a path that deep is beyond PATH_MAX for mkdir by path).
 */
function makeDeepTree(root: string, levels: number, name: string): void {
  let fd = openSync(root, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    for (let i = 0; i < levels; i += 1) {
      mkdirSync(`/proc/self/fd/${fd}/${name}`);
      const next = openSync(
        `/proc/self/fd/${fd}/${name}`,
        constants.O_RDONLY | constants.O_DIRECTORY,
      );
      closeSync(fd);
      fd = next;
    }
    writeFileSync(`/proc/self/fd/${fd}/leaf.txt`, 'deep');
  } finally {
    closeSync(fd);
  }
}

describe('job tree', () => {
  let base: string;
  let root: string;
  let canary: string;
  let canaryBefore: Record<string, string>;
  let servers: Server[];

  beforeEach(async () => {
    base = await mkdtemp(join(tmpdir(), 'svc-job-tree-'));
    root = join(base, 'root');
    canary = join(base, 'canary');
    mkdirSync(root);
    mkdirSync(join(canary, 'sub'), { recursive: true });
    writeFileSync(join(canary, 'secret.txt'), 'HOST-SECRET');
    writeFileSync(join(canary, 'sub', 'inner.txt'), 'HOST-INNER');
    canaryBefore = snapshot(canary);
    servers = [];
  });

  afterEach(async () => {
    await Promise.all(servers.map((server) => new Promise((done) => server.close(done))));
    // The canary is where the job tree's links point: nothing may have touched it.
    expect(snapshot(canary)).toEqual(canaryBefore);
    await rm(base, { recursive: true, force: true });
  });

  async function listenOn(path: string): Promise<void> {
    const server = createServer();
    servers.push(server);
    await new Promise<void>((done) => server.listen(path, done));
  }

  /** A tree with a file, a nested file and every kind of entry that is not one. */
  async function plantHostileTree(): Promise<boolean> {
    writeFileSync(join(root, 'result.txt'), 'result');
    writeFileSync(join(root, 'config.txt'), 'the service’s');
    writeFileSync(join(root, 'out.log'), 'R console');
    mkdirSync(join(root, 'plots', 'deeper'), { recursive: true });
    writeFileSync(join(root, 'plots', 'deeper', 'x.csv'), 'x\n1\n');
    symlinkSync(join(canary, 'secret.txt'), join(root, 'secret-link.txt'));
    symlinkSync(canary, join(root, 'canary-dir'));
    symlinkSync(join(canary, 'secret.txt'), join(root, 'plots', 'nested-link.txt'));
    symlinkSync(canary, join(root, 'plots', 'deeper', 'nested-dir'));
    symlinkSync('/proc/self/environ', join(root, 'environ'));
    makeFifo(join(root, 'fifo'));
    makeFifo(join(root, 'plots', 'fifo'));
    await listenOn(join(root, 'socket'));
    linkSync(join(root, 'result.txt'), join(root, 'plots', 'hard-link.txt'));
    try {
      execFileSync('mknod', [join(root, 'null-device'), 'c', '1', '3'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  }

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
        canaryBefore = snapshot(canary);
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

  describe('removeTree and emptyDirectory', () => {
    it(
      'remove links, FIFOs, sockets, device nodes and hard links, never what they point at',
      async () => {
        await plantHostileTree();
        linkSync(join(canary, 'secret.txt'), join(root, 'plots', 'canary-hard-link.txt'));
        await removeTree(root);
        expect(existsSync(root)).toBe(false);
        // afterEach: the canary is whole.
      },
      BLOCKING_TIMEOUT_MS,
    );

    it('removes a root that is a link as the link', async () => {
      const link = join(base, 'link');
      symlinkSync(canary, link);
      await removeTree(link);
      expect(existsSync(link)).toBe(false);
      await removeTree(join(base, 'missing'));
    });

    it(
      'empties a directory and keeps it',
      async () => {
        await plantHostileTree();
        await emptyDirectory(root);
        expect(readdirSync(root)).toEqual([]);
      },
      BLOCKING_TIMEOUT_MS,
    );

    it('removes a tree far deeper than the descriptors it holds open', async () => {
      // 1,000 levels: deeper ones are moved up into the root and removed from there.
      makeDeepTree(root, 1000, 'd');
      await removeTree(root);
      expect(existsSync(root)).toBe(false);
    });

    it('reports a tree it cannot remove', async () => {
      mkdirSync(join(root, 'sealed'));
      writeFileSync(join(root, 'sealed', 'file'), '');
      try {
        execFileSync('chattr', ['+i', join(root, 'sealed', 'file')], { stdio: 'ignore' });
      } catch {
        // No immutable attribute on this file system: nothing to assert.
        return;
      }
      try {
        await expect(removeTree(root)).rejects.toMatchObject({ code: 'EPERM' });
      } finally {
        execFileSync('chattr', ['-i', join(root, 'sealed', 'file')]);
      }
    });

    it('never follows a directory swapped for a link while it removes', async () => {
      // A process keeps replacing root/a/d by a link to the canary and back by a full directory.
      const swapped = join(root, 'a', 'd');
      const script = [
        'i=0',
        'while [ $i -lt 1000 ]; do',
        `  rm -rf "${swapped}" 2>/dev/null; ln -s "${canary}" "${swapped}" 2>/dev/null`,
        `  rm -f "${swapped}"; mkdir "${swapped}" 2>/dev/null && mkdir "${swapped}/sub" && echo x > "${swapped}/sub/f"`,
        `  ln -s "${canary}" "${swapped}/sub/link" 2>/dev/null`,
        '  i=$((i+1))',
        'done',
      ].join('\n');
      const attacker = spawn('sh', ['-c', script], { stdio: 'ignore' });
      const finished = new Promise((done) => attacker.once('exit', done));
      let running = true;
      void finished.then(() => (running = false));
      let removals = 0;
      while (running) {
        mkdirSync(join(root, 'a'), { recursive: true });
        // Entries that keep appearing may make one removal give up; it must never follow them.
        await removeTree(root).catch((error: Error) => {
          if (!/kept appearing|ENOTEMPTY/.test(error.message)) {
            throw error;
          }
        });
        removals += 1;
      }
      await finished;
      await removeTree(root);
      expect(existsSync(root)).toBe(false);
      expect(removals).toBeGreaterThan(0);
      // afterEach: the canary is whole.
    }, 60_000);
  });

  describe('describeJobPath', () => {
    it('keeps readable UTF-8, escapes the rest and shortens long paths', () => {
      expect(describeJobPath(Buffer.from('Zürich/a b.txt'))).toBe('Zürich/a b.txt');
      expect(describeJobPath(Buffer.from([0x61, 0xc3, 0x28, 0x09, 0x5c]))).toBe('a\\xc3(\\x09\\\\');
      const long = describeJobPath(Buffer.from('x'.repeat(5000)));
      expect([...long]).toHaveLength(161);
    });
  });
});
