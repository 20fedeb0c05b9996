import { execFileSync, spawn } from 'node:child_process';
import { existsSync, linkSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  BLOCKING_TIMEOUT_MS,
  makeDeepTree,
  useHostileTree,
} from '../../../test/support/job-tree-fixtures';
import { emptyDirectory, removeTree } from './job-tree-removal';

describe('job tree removal', () => {
  const fixture = useHostileTree();
  let base: string;
  let root: string;
  let canary: string;
  beforeEach(() => {
    ({ base, root, canary } = fixture);
  });
  const plantHostileTree = (): Promise<boolean> => fixture.plantHostileTree();

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
});
