import { execFileSync, spawn } from 'node:child_process';
import {
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import {
  BLOCKING_TIMEOUT_MS,
  makeDeepTree,
  useHostileTree,
} from '../../../test/support/job-tree-fixtures';
import { emptyDirectory, removeTree } from './job-tree-removal';

const lstatExists = (path: string): boolean =>
  lstatSync(path, { throwIfNoEntry: false }) !== undefined;

/** Removals raced against the swapping process; each is one chance for removal to follow a link. */
const SWAPPED_LINK_REMOVALS = 150;

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
      // A process keeps replacing root/a/d by a link to the canary and back by a full directory,
      // until the removals below are done: the race lasts a number of removals, not a number of
      // the attacker's forks, so a machine with slow forks still sees the same contest.
      const swapped = join(root, 'a', 'd');
      const script = [
        'while :; do',
        `  rm -rf "${swapped}" 2>/dev/null; ln -s "${canary}" "${swapped}" 2>/dev/null`,
        `  rm -f "${swapped}"; mkdir "${swapped}" 2>/dev/null && mkdir "${swapped}/sub" && echo x > "${swapped}/sub/f"`,
        `  ln -s "${canary}" "${swapped}/sub/link" 2>/dev/null`,
        'done',
      ].join('\n');
      const attacker = spawn('sh', ['-c', script], { stdio: 'ignore', detached: true });
      const finished = new Promise((done) => attacker.once('exit', done));
      let removals = 0;
      try {
        // The contest starts once the attacker has planted its first entry.
        mkdirSync(join(root, 'a'), { recursive: true });
        for (let look = 0; look < 2000 && !lstatExists(swapped); look += 1) {
          await new Promise((done) => setTimeout(done, 5));
        }
        expect(lstatExists(swapped)).toBe(true);
        while (removals < SWAPPED_LINK_REMOVALS) {
          mkdirSync(join(root, 'a'), { recursive: true });
          // Entries that keep appearing may make one removal give up; it must never follow them.
          await removeTree(root).catch((error: Error) => {
            if (!/kept appearing|ENOTEMPTY/.test(error.message)) {
              throw error;
            }
          });
          removals += 1;
        }
      } finally {
        // The whole group: the loop's own rm or mkdir must not outlive it either.
        process.kill(-attacker.pid!, 'SIGKILL');
        await finished;
      }
      await removeTree(root);
      expect(existsSync(root)).toBe(false);
      expect(removals).toBe(SWAPPED_LINK_REMOVALS);
      // afterEach: the canary is whole.
    }, 30_000);
  });
});
