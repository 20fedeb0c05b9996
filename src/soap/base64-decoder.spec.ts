import { randomBytes } from 'node:crypto';
import { Base64Decoder, Base64Error } from './base64-decoder';

function decodeInPieces(pieces: string[]): Buffer {
  const decoder = new Base64Decoder();
  const out = pieces.map((piece) => decoder.write(piece));
  out.push(decoder.end());
  return Buffer.concat(out);
}

describe('Base64Decoder', () => {
  it('decodes text cut at every position, for every padding length', () => {
    for (const length of [0, 1, 2, 3, 10, 11, 12]) {
      const bytes = randomBytes(length);
      const text = bytes.toString('base64');
      for (let cut = 0; cut <= text.length; cut++) {
        for (let second = cut; second <= text.length; second++) {
          const pieces = [text.slice(0, cut), text.slice(cut, second), text.slice(second)];
          expect(decodeInPieces(pieces).equals(bytes)).toBe(true);
        }
      }
    }
  });

  it('skips XML whitespace anywhere, padding included', () => {
    expect(decodeInPieces([' aG\n', 'k\r\n', '\t= '])).toEqual(Buffer.from('hi'));
    expect(decodeInPieces(['YQ', '=', '\n=\n'])).toEqual(Buffer.from('a'));
  });

  it.each([
    ['a character outside the alphabet', ['aGk*']],
    ['a URL-safe character', ['aG-_']],
    ['a length that is not a multiple of 4', ['aGk']],
    ['one character', ['a']],
    ['padding in the middle', ['aG==aGk=']],
    ['padding split from more data', ['aG=', '=a']],
    ['three padding characters', ['a===']],
    ['only padding', ['====']],
  ])('rejects %s', (_name, pieces) => {
    expect(() => decodeInPieces(pieces)).toThrow(Base64Error);
  });
});
