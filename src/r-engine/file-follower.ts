import { open } from 'node:fs/promises';
import { StringDecoder } from 'node:string_decoder';

/** How often a followed file is read for new bytes. */
export const FOLLOW_INTERVAL_MS = 100;

/**
 * Reads a file another process appends to (the fork child's out.log) while it is written, and
 * reports each complete line as it appears. `stop()` reads what is left, reports a last
 * unterminated line, and resolves when done. A file that does not exist yet is waited for.
 */
export function followFile(
  path: string,
  onLine: (line: string) => void,
): { stop(): Promise<void> } {
  const splitter = new LineSplitter((line) => onLine(line.replace(/\r$/, '')));
  let offset = 0;
  let reading: Promise<void> = Promise.resolve();
  const readNew = async (): Promise<void> => {
    const handle = await open(path, 'r').catch(() => null);
    if (!handle) {
      return;
    }
    try {
      const buffer = Buffer.alloc(64 * 1024);
      for (;;) {
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, offset);
        if (bytesRead === 0) {
          return;
        }
        offset += bytesRead;
        splitter.push(Buffer.from(buffer.subarray(0, bytesRead)));
      }
    } finally {
      await handle.close();
    }
  };
  const timer = setInterval(() => {
    reading = reading.then(readNew).catch(() => undefined);
  }, FOLLOW_INTERVAL_MS);
  return {
    async stop(): Promise<void> {
      clearInterval(timer);
      await reading;
      await readNew().catch(() => undefined);
      splitter.end();
    },
  };
}

/** Splits a byte stream into lines, keeping a partial last line until more arrives. */
export class LineSplitter {
  private readonly decoder = new StringDecoder('utf8');
  private pending = '';

  constructor(private readonly emit: (line: string) => void) {}

  push(chunk: Buffer): void {
    const lines = (this.pending + this.decoder.write(chunk)).split('\n');
    this.pending = lines.pop() ?? '';
    lines.forEach((line) => this.emit(line.replace(/\r$/, '')));
  }

  end(): void {
    const rest = this.pending + this.decoder.end();
    this.pending = '';
    if (rest !== '') {
      this.emit(rest.replace(/\r$/, ''));
    }
  }
}
