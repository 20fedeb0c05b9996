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
