import { printedProgress, routeOutput } from './job-progress';

describe('progress reports in R output', () => {
  it('reads a printed report', () => {
    expect(printedProgress('\u001esvc-progress 0.4 fitting the model')).toEqual({
      fraction: 0.4,
      message: 'fitting the model',
    });
    expect(printedProgress('\u001esvc-progress 1')).toEqual({ fraction: 1, message: '' });
    expect(printedProgress('\u001esvc-progress 1e-04 ')).toEqual({ fraction: 0.0001, message: '' });
  });

  it('takes nothing else for a report', () => {
    for (const line of [
      'svc-progress 0.4 no marker',
      '\u001esvc-progress 1.5 too far',
      '\u001esvc-progress -0.1',
      '\u001esvc-progress NaN',
      '\u001esvc-progressx 0.4',
    ]) {
      expect(printedProgress(line)).toBeNull();
    }
  });

  it('routes reports and output apart, also a report after an unfinished line', () => {
    const seen: string[] = [];
    const route = routeOutput({
      onOutput: (stream, line) => seen.push(`${stream}:${line}`),
      onProgress: (p) => seen.push(`progress:${p.fraction}:${p.message}`),
    });
    route?.('stdout', 'plain');
    route?.('stdout', '\u001esvc-progress 0.5 half');
    route?.('stdout', 'abc\u001esvc-progress 0.75 ');
    route?.('stderr', '\u001esvc-progress 2 not a report');
    expect(seen).toEqual([
      'stdout:plain',
      'progress:0.5:half',
      'stdout:abc',
      'progress:0.75:',
      'stderr:\u001esvc-progress 2 not a report',
    ]);
    expect(routeOutput({})).toBeUndefined();
  });
});
