import { LineSplitter } from './output-lines';

describe('LineSplitter', () => {
  const split = (chunks: Buffer[], max?: number): string[] => {
    const lines: string[] = [];
    const splitter = new LineSplitter((line) => lines.push(line), max);
    chunks.forEach((chunk) => splitter.push(chunk));
    splitter.end();
    return lines;
  };

  it('splits lines across chunks and keeps a last line without a newline', () => {
    expect(split([Buffer.from('a\nb'), Buffer.from('c\r\nd')])).toEqual(['a', 'bc', 'd']);
  });

  it('passes a line longer than the cap on in pieces, so memory stays bounded', () => {
    const lines = split([Buffer.alloc(10, 'x'), Buffer.alloc(5, 'y'), Buffer.from('\nz')], 4);
    expect(lines).toEqual(['xxxx', 'xxxx', 'xxyy', 'yyy', 'z']);
  });

  it('keeps a UTF-8 character split between chunks whole', () => {
    const euro = Buffer.from('€\n');
    expect(split([euro.subarray(0, 1), euro.subarray(1)])).toEqual(['€']);
  });

  it('turns bytes that are not UTF-8 into replacement characters', () => {
    expect(split([Buffer.from([0x61, 0xff, 0x0a])])).toEqual(['a\ufffd']);
  });
});
