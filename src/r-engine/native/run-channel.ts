import { execFile } from 'node:child_process';
import { chown, close, constants as fsConstants, fstat, open, unlink } from 'node:fs';
import { Socket } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';

const openAsync = promisify(open);
const fstatAsync = promisify(fstat);
const closeAsync = promisify(close);
const chownAsync = promisify(chown);
const unlinkAsync = promisify(unlink);
const execFileAsync = promisify(execFile);

/**
 * FIFOs made by one `mkfifo` call: a process per batch, not per run. Starting a process from the
 * service's Node costs milliseconds (it copies the page tables of a large process), so a batch
 * serves many runs: at 16 it was 3 % of the node's CPU in a batch of script jobs.
 */
const FIFO_BATCH = 128;

/**
 * FIFOs a run's R writes to and the service reads from (R's output, its status report). They
 * are made ahead, a batch at a time, in a directory that only the service can write: the
 * sandbox may open a FIFO there by its name, but can never replace it with a link or a file, so
 * the service's end is always the pipe it made. Each FIFO serves one run and is removed after.
 */
export class FifoPool {
  private readonly ready: string[] = [];
  private making: Promise<void> | null = null;
  private made = 0;
  private closed = false;

  /**
   * @param dir a directory owned by the service, not writable by the sandbox user
   * @param ownerUid the sandbox user, when it differs from the service's (it must open them)
   */
  constructor(
    private readonly dir: string,
    private readonly ownerUid: number | null,
  ) {}

  /** A fresh FIFO's path; the caller removes it with `release` after the run. */
  async take(): Promise<string> {
    while (this.ready.length === 0) {
      if (this.closed) {
        throw new Error('the FIFO pool is closed');
      }
      await this.makeBatch();
    }
    const path = this.ready.shift() as string;
    if (this.ready.length < FIFO_BATCH / 2 && !this.closed) {
      // Made in the background so that the next runs find them ready.
      void this.makeBatch().catch(() => undefined);
    }
    return path;
  }

  /** Removes a FIFO after its run (a name in the service's own directory). */
  async release(path: string): Promise<void> {
    await unlinkAsync(path).catch(() => undefined);
  }

  /**
   * Makes no more FIFOs and waits for a batch under way, so that the directory can be removed
   * (an `mkfifo` still running would add names to it while it is being emptied).
   */
  async close(): Promise<void> {
    this.closed = true;
    await this.making?.catch(() => undefined);
  }

  private makeBatch(): Promise<void> {
    this.making ??= (async () => {
      const paths = Array.from({ length: FIFO_BATCH }, () => join(this.dir, `run-${++this.made}`));
      await execFileAsync('mkfifo', ['-m', '600', '--', ...paths]);
      const uid = this.ownerUid;
      if (uid !== null) {
        await Promise.all(paths.map((path) => chownAsync(path, uid, uid)));
      }
      this.ready.push(...paths);
    })().finally(() => (this.making = null));
    return this.making;
  }
}

/**
 * Opens the service's end of a FIFO from the pool for reading: non-blocking (no writer is
 * needed yet), never through a link, and only if it is still a FIFO.
 */
export async function openFifoForReading(path: string): Promise<number> {
  const fd = await openAsync(
    path,
    fsConstants.O_RDONLY | fsConstants.O_NONBLOCK | fsConstants.O_NOFOLLOW,
  );
  try {
    if (!(await fstatAsync(fd)).isFIFO()) {
      throw new Error(`${path} is not a FIFO`);
    }
    return fd;
  } catch (error) {
    await closeAsync(fd).catch(() => undefined);
    throw error;
  }
}

/**
 * A write end for a spawned R process (a descriptor it inherits); the reader must be open
 * first, so the open returns at once. The caller closes it once the child has it.
 */
export async function openFifoForWriting(path: string): Promise<number> {
  return openAsync(path, fsConstants.O_WRONLY | fsConstants.O_NOFOLLOW);
}

export async function closeDescriptor(fd: number): Promise<void> {
  await closeAsync(fd).catch(() => undefined);
}

/**
 * Reads a FIFO's descriptor on the event loop's poller (never a blocking read on a thread), as
 * chunks to `onData`, until every writer has closed it. `done` resolves at that end, or when
 * `stop(graceMs)` gives up on writers that are still open (a process that outlived its run):
 * the reader never waits for a job.
 */
export function readFifo(
  fd: number,
  onData: (chunk: Buffer) => void,
): { done: Promise<void>; stop(graceMs: number): Promise<void> } {
  const socket = new Socket({ fd, readable: true, writable: false });
  socket.on('data', onData);
  const done = new Promise<void>((resolve) => {
    socket.once('end', () => resolve());
    socket.once('close', () => resolve());
    socket.once('error', () => resolve());
  });
  return {
    done,
    async stop(graceMs: number): Promise<void> {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        done,
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, graceMs);
        }),
      ]);
      clearTimeout(timer);
      socket.destroy();
    },
  };
}

/** At most this many bytes of a status report are read; the rest is dropped. */
export const MAX_REPORT_BYTES = 64 * 1024;

/** Collects a small report from a FIFO, bounded: what a run says of itself when it ends. */
export function collectReport(fd: number): {
  done: Promise<void>;
  stop(graceMs: number): Promise<Buffer>;
} {
  const chunks: Buffer[] = [];
  let size = 0;
  const reader = readFifo(fd, (chunk) => {
    const room = MAX_REPORT_BYTES - size;
    if (room > 0) {
      chunks.push(Buffer.from(chunk.subarray(0, room)));
      size += Math.min(room, chunk.length);
    }
  });
  return {
    done: reader.done,
    async stop(graceMs: number): Promise<Buffer> {
      await reader.stop(graceMs);
      return Buffer.concat(chunks, size);
    },
  };
}

/** Decodes %XX escapes into bytes, then UTF-8 (never throws on a malformed escape). */
export function percentDecode(text: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (c === 0x25 && /^[0-9A-Fa-f]{2}$/.test(text.slice(i + 1, i + 3))) {
      bytes.push(parseInt(text.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(c & 0xff);
    }
  }
  return Buffer.from(bytes).toString('utf8');
}
