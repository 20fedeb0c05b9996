import { formatUptime } from './system.service';

describe('formatUptime', () => {
  it('names the largest units and drops empty leading ones', () => {
    expect(formatUptime(0)).toBe('0 s');
    expect(formatUptime(59_999)).toBe('59 s');
    expect(formatUptime(61_000)).toBe('1 min 1 s');
    expect(formatUptime(3_600_000)).toBe('1 h 0 min 0 s');
    expect(formatUptime(((2 * 24 + 3) * 3600 + 4 * 60 + 5) * 1000)).toBe('2 d 3 h 4 min 5 s');
  });
});
