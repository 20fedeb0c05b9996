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

/** Collects stream chunks and hands out each complete message. */
export class FrameReader {
  private buffered: Buffer[] = [];
  private bufferedBytes = 0;

  constructor(private readonly onMessage: (fields: string[]) => void) {}

  /** Throws FrameError on a malformed frame; the connection is then unusable. */
  push(chunk: Buffer): void {
    this.buffered.push(chunk);
    this.bufferedBytes += chunk.length;
    while (this.bufferedBytes >= 4) {
      let data = this.buffered.length === 1 ? this.buffered[0] : Buffer.concat(this.buffered);
      const bodyLength = data.readUInt32BE(0);
      if (bodyLength > MAX_FRAME_BYTES) {
        throw new FrameError(`frame of ${bodyLength} bytes exceeds the limit`);
      }
      if (data.length < 4 + bodyLength) {
        this.buffered = [data];
        return;
      }
      const body = data.subarray(4, 4 + bodyLength);
      data = data.subarray(4 + bodyLength);
      this.buffered = data.length > 0 ? [data] : [];
      this.bufferedBytes = data.length;
      this.onMessage(decodeBody(body));
    }
  }
}
