import { NotificationReader } from './embedded-postgres';

/** A backend message: type byte, Int32 length (itself included), body. */
function message(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

function notification(channel: string, payload: string): Buffer {
  const pid = Buffer.alloc(4);
  pid.writeInt32BE(42);
  return message('A', Buffer.concat([pid, Buffer.from(`${channel}\0${payload}\0`, 'utf8')]));
}

describe('NotificationReader: the notifications in a backend stream', () => {
  it('finds them between other messages, in any split of the stream into chunks', () => {
    const stream = Buffer.concat([
      message('D', Buffer.alloc(70_000, 0x41)), // a row full of 'A's
      notification('svc_api_key_changed', ' k0123'),
      message('C', Buffer.from('SELECT 1\0')),
      notification('svc_catalog_changed', 'node:1:ab ledger/R_SCRIPTS'),
      message('Z', Buffer.from('I')),
    ]);
    for (const size of [1, 3, 7, 4096, stream.length]) {
      const heard: Array<[string, string]> = [];
      const reader = new NotificationReader((channel, payload) => heard.push([channel, payload]));
      for (let at = 0; at < stream.length; at += size) {
        // Each chunk a view into a larger buffer, which is then overwritten, as PGlite's memory.
        const memory = Buffer.alloc(size + 16);
        const chunk = stream.subarray(at, at + size);
        chunk.copy(memory, 8);
        reader.read(new Uint8Array(memory.buffer, memory.byteOffset + 8, chunk.length));
        memory.fill(0x41);
      }
      expect({ size, heard }).toEqual({
        size,
        heard: [
          ['svc_api_key_changed', ' k0123'],
          ['svc_catalog_changed', 'node:1:ab ledger/R_SCRIPTS'],
        ],
      });
    }
  });
});
