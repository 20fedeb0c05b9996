import {
  MultipartSplitter,
  MultipartSyntaxError,
  isValidBoundary,
  type PartHeaders,
} from './multipart-related';

interface SplitPart {
  headers: Record<string, string>;
  body: string;
}

/** Splits `body` fed in the given pieces; returns the parts with their bodies. */
function split(boundary: string, pieces: Buffer[]): SplitPart[] {
  const parts: SplitPart[] = [];
  const splitter = new MultipartSplitter(boundary, (headers: PartHeaders) => {
    const part: SplitPart = { headers: Object.fromEntries(headers), body: '' };
    parts.push(part);
    let ended = false;
    return {
      write: (chunk) => {
        expect(ended).toBe(false);
        part.body += chunk.toString('latin1');
      },
      end: () => {
        ended = true;
      },
    };
  });
  for (const piece of pieces) {
    splitter.write(piece);
  }
  splitter.end();
  return parts;
}

const BODY =
  'preamble\r\n' +
  '--b0und\r\nContent-ID: <a>\r\nContent-Type: text/plain;\r\n charset=utf-8\r\n\r\nfirst\r\n--b0un' +
  '\r\n--b0und  \t\r\n\r\n\r\n-b0und, x--b0und, \r\n--b0unX are no delimiters\r\n' +
  '--b0und\r\nX: 1\r\n\r\n\r\n\r\n--b0und--\r\nepilogue --b0und\r\n';
const EXPECTED: SplitPart[] = [
  {
    headers: { 'content-id': '<a>', 'content-type': 'text/plain; charset=utf-8' },
    body: 'first\r\n--b0un',
  },
  { headers: {}, body: '\r\n-b0und, x--b0und, \r\n--b0unX are no delimiters' },
  { headers: { x: '1' }, body: '\r\n' },
];

describe('MultipartSplitter', () => {
  it('splits a body cut in two at every position', () => {
    const body = Buffer.from(BODY, 'latin1');
    for (let cut = 0; cut <= body.length; cut++) {
      expect(split('b0und', [body.subarray(0, cut), body.subarray(cut)])).toEqual(EXPECTED);
    }
  });

  it('splits a body fed one byte at a time', () => {
    const body = Buffer.from(BODY, 'latin1');
    expect(
      split(
        'b0und',
        [...body].map((byte) => Buffer.from([byte])),
      ),
    ).toEqual(EXPECTED);
  });

  it('takes a first delimiter at the very start (no preamble) and an empty part', () => {
    expect(split('x', [Buffer.from('--x\r\nA: b\r\n\r\n\r\n--x--')])).toEqual([
      { headers: { a: 'b' }, body: '' },
    ]);
  });

  it.each([
    ['no delimiter', 'just text', /no boundary delimiter/],
    ['no close delimiter', '--x\r\n\r\ndata', /truncated/],
    ['headers cut short', '--x\r\nA: b', /truncated/],
    [
      'a delimiter inside the headers',
      '--x\r\nA: b\r\n--x\r\n\r\n--x--',
      /interrupts the part headers/,
    ],
    ['text after the boundary on its line', '--xy\r\n\r\n--x--', /more than the boundary/],
    ['a header line without a name', '--x\r\n: v\r\n\r\n\r\n--x--', /no field name/],
  ])('rejects %s', (_name, body, message) => {
    expect(() => split('x', [Buffer.from(body)])).toThrow(MultipartSyntaxError);
    expect(() => split('x', [Buffer.from(body)])).toThrow(message);
  });

  it('rejects part headers over 16 KiB', () => {
    const body = Buffer.from(`--x\r\nA: ${'v'.repeat(17 * 1024)}\r\n\r\n\r\n--x--`);
    expect(() => split('x', [body])).toThrow(/exceeds 16384 bytes/);
  });

  it('accepts only RFC 2046 boundaries', () => {
    expect(isValidBoundary("uuid:0a1b-c2_d'(+),./=?")).toBe(true);
    expect(isValidBoundary('a'.repeat(70))).toBe(true);
    expect(isValidBoundary('a'.repeat(71))).toBe(false);
    expect(isValidBoundary('')).toBe(false);
    expect(isValidBoundary('ends in space ')).toBe(false);
    expect(isValidBoundary('line\r\nbreak')).toBe(false);
    expect(
      () =>
        new MultipartSplitter('bad"quote', () => ({
          write: () => undefined,
          end: () => undefined,
        })),
    ).toThrow(MultipartSyntaxError);
  });
});
