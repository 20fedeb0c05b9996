import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeZip, makeZipWithRawName } from '../../test/support/zip-fixtures';
import type { NeededResult } from '../queue/queue-needs';
import { NeededResultError, withNeededValues, writeNeededResults } from './needed-results';

const json = (name: string, text: string, succeeded = true): NeededResult => ({
  name,
  succeeded,
  type: 'json',
  data: Buffer.from(text),
});

describe('withNeededValues', () => {
  it("splices each needed step's JSON text in as the argument named after it", () => {
    expect(
      withNeededValues('{"k": 2}', [json('prep', '{"n":12345678901234567890}'), json('b', '[1]')]),
    ).toBe('{"prep":{"n":12345678901234567890},"b":[1],"k": 2}');
    expect(withNeededValues(' {} ', [json('prep', '1')])).toBe('{"prep":1}');
  });

  it('leaves a step that did not succeed out, so that R finds it missing', () => {
    expect(withNeededValues('{"k":1}', [json('fit1', 'oops', false)])).toBe('{"k":1}');
  });
});

describe('writeNeededResults', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'needed-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('lays out a folder per needed step that succeeded, a ZIP as its files', async () => {
    const zip = await makeZip([
      { name: 'out.txt', content: 'one' },
      { name: 'sub/deeper.csv', content: 'a,b' },
    ]);
    const folders = await writeNeededResults(dir, [
      { name: 'script', succeeded: true, type: 'zip', data: zip },
      json('fn', '{"v":1}'),
      json('failed', 'error', false),
    ]);
    expect(folders).toEqual(['script', 'fn']);
    expect(readdirSync(dir).sort()).toEqual(['fn', 'script']);
    expect(readFileSync(join(dir, 'script', 'sub', 'deeper.csv'), 'utf8')).toBe('a,b');
    expect(readFileSync(join(dir, 'fn', 'result.json'), 'utf8')).toBe('{"v":1}');
  });

  it('refuses a result entry that would leave its folder', async () => {
    for (const name of ['../escape.txt', 'a/../../b', '/abs', 'back\\slash']) {
      const zip = await makeZipWithRawName(name, 'x');
      await expect(
        writeNeededResults(dir, [{ name: 'script', succeeded: true, type: 'zip', data: zip }]),
      ).rejects.toThrow(NeededResultError);
      rmSync(join(dir, 'script'), { recursive: true, force: true });
    }
    expect(readdirSync(dir)).toEqual([]);
  });
});
