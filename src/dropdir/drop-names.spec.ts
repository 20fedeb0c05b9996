import {
  claimName,
  droppedKind,
  errorFileName,
  isTemporaryName,
  parseClaimName,
  resultFileName,
} from './drop-names';

describe('drop directory names', () => {
  it('leaves hidden names and names ending in .tmp or .part alone', () => {
    for (const name of ['.report.zip', 'report.zip.tmp', 'report.zip.part', 'x.PART']) {
      expect(isTemporaryName(name)).toBe(true);
    }
    for (const name of ['report.zip', 'script.R', 'part.zip', 'tmp']) {
      expect(isTemporaryName(name)).toBe(false);
    }
  });

  it('tells a ZIP from an R script by the extension, in any case', () => {
    expect(droppedKind('a.zip')).toBe('zip');
    expect(droppedKind('a.ZIP')).toBe('zip');
    expect(droppedKind('a.R')).toBe('script');
    expect(droppedKind('a.r')).toBe('script');
    expect(droppedKind('a.txt')).toBeNull();
    expect(droppedKind('zip')).toBeNull();
  });

  it('reads back the claim id and the original name of a claim, dots and all', () => {
    const name = claimName('0123456789abcdef', 'q3.sales.zip');
    expect(parseClaimName(name)).toEqual({ claimId: '0123456789abcdef', fileName: 'q3.sales.zip' });
    expect(parseClaimName('q3.sales.zip')).toBeNull();
    expect(parseClaimName('0123456789abcdef.')).toBeNull();
  });

  it('names results and reasons after the dropped file', () => {
    expect(resultFileName('a.zip', 'zip')).toBe('a.zip.result.zip');
    expect(resultFileName('a.zip', 'txt')).toBe('a.zip.result.txt');
    expect(errorFileName('a.zip')).toBe('a.zip.error.txt');
  });
});
