import type { Readable } from 'node:stream';

/** The longest line kept whole; a longer one is passed on in pieces of this size. */
export const MAX_LINE_BYTES = 64 * 1024;

const NEWLINE = 0x0a;

/**
 * Splits a byte stream into lines, keeping a partial last line until more arrives. Memory is
 * bounded whatever the stream holds: a line longer than `maxLineBytes` (R printing megabytes
 * without a newline) is passed on in pieces, so at most one piece is ever pending. Bytes that
 * are not UTF-8 become U+FFFD.
 */
export class LineSplitter {
  private pending: Buffer[] = [];
  private pendingBytes = 0;

  constructor(
    private readonly emit: (line: string) => void,
    private readonly maxLineBytes = MAX_LINE_BYTES,
  ) {}

  push(chunk: Buffer): void {
    let start = 0;
    while (start < chunk.length) {
      const newline = chunk.indexOf(NEWLINE, start);
      const end = newline < 0 ? chunk.length : newline;
      let piece = chunk.subarray(start, end);
      // A line over the cap goes out in pieces of the cap.
      while (this.pendingBytes + piece.length > this.maxLineBytes) {
        const room = this.maxLineBytes - this.pendingBytes;
        this.keep(piece.subarray(0, room));
        this.flushLine();
        piece = piece.subarray(room);
      }
      this.keep(piece);
      if (newline < 0) {
        return;
      }
      this.flushLine();
      start = newline + 1;
    }
  }

  /** The stream ended: a last line without a newline is passed on. */
  end(): void {
    if (this.pendingBytes > 0) {
      this.flushLine();
    }
  }

  private keep(piece: Buffer): void {
    if (piece.length > 0) {
      // A copy: the chunk's memory is the stream's, and may be large.
      this.pending.push(Buffer.from(piece));
      this.pendingBytes += piece.length;
    }
  }

  private flushLine(): void {
    const bytes =
      this.pending.length === 1 ? this.pending[0] : Buffer.concat(this.pending, this.pendingBytes);
    this.pending = [];
    this.pendingBytes = 0;
    this.emit(bytes.toString('utf8').replace(/\r$/, ''));
  }
}

/**
 * Calls onLine for each line of a stream, each cut at maxLineBytes (the rest of a longer line is
 * read and dropped), so that output without newlines cannot grow the service's memory; `bytes`
 * is the line's whole length.
 */
export function readBoundedLines(
  input: Readable,
  maxLineBytes: number,
  onLine: (line: string, bytes: number) => void,
): void {
  let held: Buffer[] = [];
  let heldBytes = 0;
  let lineBytes = 0;
  const emit = (): void => {
    let line = Buffer.concat(held, heldBytes).toString('utf8');
    if (line.endsWith('\r')) {
      line = line.slice(0, -1);
    }
    if (lineBytes > heldBytes) {
      line += ` [line of ${lineBytes} bytes cut]`;
    }
    onLine(line, lineBytes);
    held = [];
    heldBytes = 0;
    lineBytes = 0;
  };
  input.on('data', (chunk: Buffer) => {
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(10, start);
      const end = newline < 0 ? chunk.length : newline;
      const take = Math.min(end - start, maxLineBytes - heldBytes);
      if (take > 0) {
        // Copied: a slice would keep the whole chunk alive.
        held.push(Buffer.from(chunk.subarray(start, start + take)));
        heldBytes += take;
      }
      lineBytes += end - start;
      if (newline < 0) {
        return;
      }
      emit();
      start = newline + 1;
    }
  });
  input.on('end', () => {
    if (lineBytes > 0) {
      emit();
    }
  });
}
