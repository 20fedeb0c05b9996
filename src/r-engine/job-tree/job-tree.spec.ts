import { describeJobPath } from './job-tree';

describe('job tree', () => {
  describe('describeJobPath', () => {
    it('keeps readable UTF-8, escapes the rest and shortens long paths', () => {
      expect(describeJobPath(Buffer.from('Zürich/a b.txt'))).toBe('Zürich/a b.txt');
      expect(describeJobPath(Buffer.from([0x61, 0xc3, 0x28, 0x09, 0x5c]))).toBe('a\\xc3(\\x09\\\\');
      const long = describeJobPath(Buffer.from('x'.repeat(5000)));
      expect([...long]).toHaveLength(161);
    });
  });
});
