import { createWriteStream, type WriteStream } from 'node:fs';

/**
 * Bytes written to a temp file as they arrive. Writes never block the caller; `drained()`
 * tells when the file has caught up, so the reader can pause its input (backpressure).
 */
export class FileSpool {
  private readonly stream: WriteStream;
  private failure: Error | undefined;
  private readonly closed: Promise<void>;
  private waitingForDrain: Promise<void> | undefined;
  size = 0;

  constructor(readonly path: string) {
    // 'wx': the temp directory is ours and new, so an existing file means something is wrong.
    this.stream = createWriteStream(path, { flags: 'wx' });
    this.closed = new Promise((resolve) => {
      this.stream.once('close', resolve);
    });
    this.stream.on('error', (error) => {
      this.failure ??= error;
    });
  }

  write(chunk: Buffer): void {
    this.throwIfFailed();
    if (chunk.length === 0) {
      return;
    }
    this.size += chunk.length;
    if (!this.stream.write(chunk) && !this.waitingForDrain) {
      this.waitingForDrain = new Promise<void>((resolve) => {
        const settle = (): void => {
          this.stream.off('drain', settle);
          this.stream.off('close', settle);
          this.waitingForDrain = undefined;
          resolve();
        };
        this.stream.on('drain', settle);
        this.stream.on('close', settle);
      });
    }
  }

  /** Resolves when the file's write buffer is below its high-water mark again. */
  drained(): Promise<void> | undefined {
    return this.waitingForDrain;
  }

  /** Flushes and closes the file; rejects with the write error if one happened. */
  async end(): Promise<void> {
    if (!this.stream.writableEnded && !this.stream.destroyed) {
      this.stream.end();
    }
    await this.closed;
    this.throwIfFailed();
  }

  /** Closes the file without flushing (error paths; the directory is removed next). */
  async abandon(): Promise<void> {
    this.stream.destroy();
    await this.closed;
  }

  private throwIfFailed(): void {
    if (this.failure) {
      throw this.failure;
    }
  }
}
