import { mkdtemp, readdir, rm, rmdir, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FifoPool, closeDescriptor, openFifoForReading, percentDecode } from './run-channel';

describe('FifoPool', () => {
  let dir: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'svc-fifo-spec-'));
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('hands out a fresh FIFO per run and removes it on release', async () => {
    const pool = new FifoPool(dir, null);
    const first = await pool.take();
    const second = await pool.take();
    expect(first).not.toBe(second);
    const fd = await openFifoForReading(first);
    await closeDescriptor(fd);
    await pool.release(first);
    expect(await readdir(dir)).not.toContain(first.slice(dir.length + 1));
    await pool.close();
  });

  it('after close, waits for the batch under way so that its directory can be removed', async () => {
    const pool = new FifoPool(dir, null);
    // Taking the ninth FIFO of a batch starts the next batch in the background.
    for (let i = 0; i < 9; i += 1) {
      await pool.take();
    }
    await pool.close();
    await rm(dir, { recursive: true, force: true });
    // Nothing is made after close: the directory stays gone.
    await new Promise((resolve) => setTimeout(resolve, 50));
    await expect(rmdir(dir)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('makes no FIFO once closed', async () => {
    const pool = new FifoPool(dir, null);
    await pool.close();
    await expect(pool.take()).rejects.toThrow(/closed/);
    expect(await readdir(dir)).toEqual([]);
  });

  it('refuses to open a link in place of a FIFO', async () => {
    const link = join(dir, 'link');
    await symlink('/etc/passwd', link);
    await expect(openFifoForReading(link)).rejects.toMatchObject({ code: 'ELOOP' });
  });

  it('refuses a plain file in place of a FIFO', async () => {
    await expect(openFifoForReading('/etc/hostname')).rejects.toThrow(/not a FIFO/);
  });
});

describe('percentDecode', () => {
  it('decodes what R percent-encoded', () => {
    expect(percentDecode('a%20b%25c')).toBe('a b%c');
  });
});
