import { encodeFrame, FrameError, FrameReader, FrameTooLargeError } from './r-session-frame';

function collect(): { reader: FrameReader; messages: string[][] } {
  const messages: string[][] = [];
  return { reader: new FrameReader((fields) => messages.push(fields)), messages };
}

describe('session framing', () => {
  it('encodes lengths big-endian: frame length, then each field’s length and bytes', () => {
    const frame = encodeFrame(['ok', 'é']);
    // Body: (4 + 2 bytes of "ok") + (4 + 2 bytes of "é" in UTF-8) = 12.
    const expected = [0, 0, 0, 12, 0, 0, 0, 2, 0x6f, 0x6b, 0, 0, 0, 2, 0xc3, 0xa9];
    expect([...frame]).toEqual(expected);
  });

  it('round-trips any string: empty fields, newlines, NULs, non-ASCII', () => {
    const fields = ['call', '', 'a\nb\r\n', 'nul\u0000inside', '日本語 ☃', 'x'.repeat(100_000)];
    const { reader, messages } = collect();
    reader.push(encodeFrame(fields));
    expect(messages).toEqual([fields]);
  });

  it('a message with no fields is an empty frame', () => {
    const { reader, messages } = collect();
    reader.push(encodeFrame([]));
    expect(messages).toEqual([[]]);
  });

  it('reassembles frames split at every byte, and splits frames that arrive together', () => {
    const frames = Buffer.concat([
      encodeFrame(['ok', '{"a":1}']),
      encodeFrame(['fail', 'r-error', 'boom']),
      encodeFrame(['ok', '']),
    ]);
    const { reader, messages } = collect();
    for (let i = 0; i < frames.length; i++) {
      reader.push(frames.subarray(i, i + 1));
    }
    expect(messages).toEqual([
      ['ok', '{"a":1}'],
      ['fail', 'r-error', 'boom'],
      ['ok', ''],
    ]);
    const together = collect();
    together.reader.push(frames);
    expect(together.messages).toEqual(messages);
  });

  it('waits for the rest of a frame without emitting anything', () => {
    const frame = encodeFrame(['ok', 'value']);
    const { reader, messages } = collect();
    reader.push(frame.subarray(0, frame.length - 1));
    expect(messages).toEqual([]);
    reader.push(frame.subarray(frame.length - 1));
    expect(messages).toEqual([['ok', 'value']]);
  });

  it('rejects a field that overruns its frame', () => {
    const bad = Buffer.from([0, 0, 0, 6, 0, 0, 0, 9, 0x61, 0x62]);
    expect(() => collect().reader.push(bad)).toThrow(FrameError);
  });

  it('rejects a truncated field length', () => {
    const bad = Buffer.from([0, 0, 0, 2, 0, 0]);
    expect(() => collect().reader.push(bad)).toThrow(/truncated/);
  });

  it('rejects a frame longer than the limit before buffering it', () => {
    expect(() => collect().reader.push(Buffer.from([0xff, 0xff, 0xff, 0xff]))).toThrow(
      /exceeds the limit/,
    );
  });

  it('refuses a header above the reader’s own limit, naming both sizes', () => {
    const reader = new FrameReader(() => undefined, 100);
    const header = Buffer.alloc(4);
    header.writeUInt32BE(101, 0);
    expect(() => reader.push(header)).toThrow(new FrameTooLargeError(101, 100));
    expect(reader.pendingBytes).toBe(0);
  });

  it('holds an unfinished frame as it arrives and hands it out once whole', () => {
    const frame = encodeFrame(['ok', 'x'.repeat(1_000_000)]);
    const { reader, messages } = collect();
    for (let at = 0; at < frame.length; at += 1000) {
      reader.push(frame.subarray(at, at + 1000));
      expect(reader.pendingBytes).toBe(Math.min(at + 1000, frame.length) % frame.length);
    }
    expect(messages).toEqual([['ok', 'x'.repeat(1_000_000)]]);
  });
});
