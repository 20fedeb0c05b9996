/**
 * The framing between the service and a warm R session (`r/session.R`): a message is a list of
 * UTF-8 strings, sent as one frame
 *
 *   u32 body length | (u32 field length | field bytes)*      (all lengths big-endian)
 *
 * so a payload may hold any character, newlines and NULs included, and a frame is written with
 * one call on either side.
 */
export const MAX_FRAME_BYTES = 1024 * 1024 * 1024;

export function encodeFrame(fields: readonly string[]): Buffer {
  const parts = fields.map((field) => Buffer.from(field, 'utf8'));
  const bodyLength = parts.reduce((sum, part) => sum + 4 + part.length, 0);
  const frame = Buffer.allocUnsafe(4 + bodyLength);
  frame.writeUInt32BE(bodyLength, 0);
  let offset = 4;
  for (const part of parts) {
    frame.writeUInt32BE(part.length, offset);
    part.copy(frame, offset + 4);
    offset += 4 + part.length;
  }
  return frame;
}

export class FrameError extends Error {
  override readonly name = 'FrameError';
}

/** A frame whose header announces more than the reader accepts. */
export class FrameTooLargeError extends FrameError {
  constructor(
    readonly bodyBytes: number,
    readonly limit: number,
  ) {
    super(`a frame of ${bodyBytes} bytes exceeds the limit of ${limit} bytes`);
  }
}

function decodeBody(body: Buffer): string[] {
  const fields: string[] = [];
  let offset = 0;
  while (offset < body.length) {
    if (offset + 4 > body.length) {
      throw new FrameError('truncated field length');
    }
    const length = body.readUInt32BE(offset);
    const end = offset + 4 + length;
    if (end > body.length) {
      throw new FrameError(`field of ${length} bytes overruns its frame`);
    }
    fields.push(body.toString('utf8', offset + 4, end));
    offset = end;
  }
  return fields;
}

/**
 * Collects stream chunks and hands out each complete message. The other side is not trusted: a
 * header that announces more than `maxBodyBytes` is refused before anything of the body is
 * held, and the chunks of an unfinished frame are joined once, when it is complete (never once
 * per chunk), so at most one frame of `maxBodyBytes` is held and each byte is copied once.
 */
export class FrameReader {
  private chunks: Buffer[] = [];
  private bytes = 0;
  /** Bytes the frame being collected needs in all (header included); null: header not read. */
  private needed: number | null = null;

  constructor(
    private readonly onMessage: (fields: string[]) => void,
    private readonly maxBodyBytes = MAX_FRAME_BYTES,
  ) {}

  /** Bytes of an unfinished frame held. */
  get pendingBytes(): number {
    return this.bytes;
  }

  /** Throws FrameError on a malformed frame; the connection is then unusable. */
  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.bytes += chunk.length;
    if (this.bytes < (this.needed ?? 4)) {
      return;
    }
    const data = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks, this.bytes);
    let at = 0;
    this.needed = null;
    while (data.length - at >= 4) {
      const bodyLength = data.readUInt32BE(at);
      if (bodyLength > this.maxBodyBytes) {
        this.chunks = [];
        this.bytes = 0;
        throw new FrameTooLargeError(bodyLength, this.maxBodyBytes);
      }
      if (data.length - at < 4 + bodyLength) {
        this.needed = 4 + bodyLength;
        break;
      }
      const body = data.subarray(at + 4, at + 4 + bodyLength);
      at += 4 + bodyLength;
      this.onMessage(decodeBody(body));
    }
    // A short rest is copied, so that it does not hold the whole joined buffer.
    const rest = at === 0 ? data : Buffer.from(data.subarray(at));
    this.chunks = rest.length > 0 ? [rest] : [];
    this.bytes = rest.length;
  }
}
