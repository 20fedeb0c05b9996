import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeZip, makeZipWithRawName } from '../../test/support/zip-fixtures';
import type { NeededResult } from '../queue/queue-needs';
import { NeededResultError, withNeededValues, writeNeededResults } from './needed-results';

const result = (name: string, type: string, data: Buffer, succeeded = true): NeededResult => ({
  name,
  succeeded,
  type,
  data,
  pieces: null,
});

/** As the queue copies an inline result: a new file, never an existing one. */
const copy = (need: NeededResult, path: string): Promise<void> => {
  writeFileSync(path, need.data ?? Buffer.alloc(0), { flag: 'wx' });
  return Promise.resolve();
};

describe('withNeededValues', () => {
  it("splices each needed step's JSON text in as the argument named after it", () => {
    expect(
      withNeededValues('{"k": 2}', [
        { name: 'prep', json: '{"n":12345678901234567890}' },
        { name: 'b', json: '[1]' },
      ]),
    ).toBe('{"prep":{"n":12345678901234567890},"b":[1],"k": 2}');
    expect(withNeededValues(' {} ', [{ name: 'prep', json: '1' }])).toBe('{"prep":1}');
    expect(withNeededValues('{"k":1}', [])).toBe('{"k":1}');
  });
});

describe('writeNeededResults', () => {
  let root: string;
  let work: string;
  let spill: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'needed-'));
    work = join(root, 'work');
    spill = join(root, 'job');
    mkdirSync(work);
    mkdirSync(spill);
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('lays out a folder per needed step that succeeded, a ZIP as its files', async () => {
    const zip = await makeZip([
      { name: 'out.txt', content: 'one' },
      { name: 'sub/deeper.csv', content: 'a,b' },
    ]);
    const folders = await writeNeededResults(
      work,
      spill,
      [
        result('script', 'zip', zip),
        result('fn', 'json', Buffer.from('{"v":1}')),
        result('failed', 'json', Buffer.from('error'), false),
      ],
      copy,
    );
    expect(folders).toEqual(['script', 'fn']);
    expect(readdirSync(work).sort()).toEqual(['fn', 'script']);
    expect(readFileSync(join(work, 'script', 'sub', 'deeper.csv'), 'utf8')).toBe('a,b');
    expect(readFileSync(join(work, 'fn', 'result.json'), 'utf8')).toBe('{"v":1}');
    // The ZIP's copy is gone once unpacked.
    expect(readdirSync(spill)).toEqual([]);
  });

  it('refuses a result entry that would leave its folder', async () => {
    for (const name of ['../escape.txt', 'a/../../b', '/abs', 'back\\slash']) {
      const zip = await makeZipWithRawName(name, 'x');
      await expect(
        writeNeededResults(work, spill, [result('script', 'zip', zip)], copy),
      ).rejects.toThrow(NeededResultError);
      rmSync(join(work, 'script'), { recursive: true, force: true });
    }
    expect(readdirSync(work)).toEqual([]);
    expect(readdirSync(root).sort()).toEqual(['job', 'work']);
  });
});
