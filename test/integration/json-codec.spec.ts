import { execFileSync } from 'node:child_process';
import { loadConfig } from '../../src/config/app-config';
import type { FunctionLibrary } from '../../src/r-engine/function-library';
import { rSourcePath } from '../../src/r-engine/r-sources';
import { WebREngine } from '../../src/r-engine/webr/webr.engine';

/**
 * json.R, the base-R codec of exported functions (webR; native R without jsonlite), against
 * jsonlite itself: the same R values from the same JSON, the same JSON from the same values, on
 * native R and on webR.
 */
const CASES = [
  '1',
  '-0',
  '0.1',
  '1e300',
  '123456789012',
  '2147483648',
  '"text"',
  '"a\\nb\\u00e9\\ud83d\\ude00 \\"quoted\\" \\\\ \\u0001\\t"',
  'true',
  'null',
  '[1,2,3]',
  '[1,null,3]',
  '[1.5,2]',
  '[1,"a",null]',
  '[true,false,null]',
  '[null,null]',
  '[1,true]',
  '[]',
  '{}',
  '{"x":1,"y":"b"}',
  '{"a":[1],"b":{"c":null}}',
  '[{"a":1,"b":"x"},{"a":2}]',
  '[{"a":[1,2]},{"a":3}]',
  '[[1,2],[3,4]]',
  '[[1],[2,3]]',
  '[[null],[1]]',
  '{"nested":{"deeper":{"list":[{"k":"v"}]}}}',
];

/** R that reads the cases (one per line, from stdin) and prints one verdict line per case. */
const COMPARE = `
codec <- eval(parse(file = ${JSON.stringify(rSourcePath('json.R'))}, keep.source = FALSE))
cases <- readLines(file("stdin"), encoding = "UTF-8")
for (text in cases) {
  ours <- codec$from_json(text)
  theirs <- jsonlite::fromJSON(text)
  written <- as.character(jsonlite::toJSON(theirs, auto_unbox = TRUE, dataframe = "rows",
                                           na = "null", null = "null", digits = NA))
  cat(identical(ours, theirs), identical(codec$to_json(theirs), written), written, "\\n", sep = "\\t")
}
`;

const hasJsonlite = (() => {
  try {
    execFileSync('Rscript', ['-e', 'stopifnot(requireNamespace("jsonlite", quietly = TRUE))'], {
      stdio: 'ignore',
    });
    return true;
  } catch {
    return false;
  }
})();
// CI installs r-cran-jsonlite: there a missing jsonlite is a failure, not a skip.
const withJsonlite = hasJsonlite || process.env.CI === 'true' ? describe : describe.skip;

withJsonlite('json.R against jsonlite', () => {
  /** Per case: same value read, same JSON written, and jsonlite's JSON. */
  let verdicts: Array<{ read: boolean; written: boolean; json: string }>;

  beforeAll(() => {
    const output = execFileSync('Rscript', ['-e', COMPARE], {
      input: CASES.join('\n') + '\n',
      encoding: 'utf8',
    });
    verdicts = output
      .trimEnd()
      .split('\n')
      .map((line) => {
        const [read, written, json] = line.split('\t');
        return { read: read === 'TRUE', written: written === 'TRUE', json };
      });
  });

  it('reads every case into the value jsonlite reads, and writes it as jsonlite does', () => {
    expect(verdicts).toHaveLength(CASES.length);
    const differing = CASES.filter((_, i) => !verdicts[i].read || !verdicts[i].written);
    expect(differing).toEqual([]);
  });

  it('gives the same JSON on webR, through an exported function', async () => {
    const engine = new WebREngine({ maxRequestBytes: 1024 * 1024 });
    await engine.start();
    try {
      const library: FunctionLibrary = {
        id: 1,
        packages: 0,
        files: [{ name: 'echo.R', content: "#' @export\necho <- function(value) value\n" }],
      };
      engine.functionCalls(loadConfig({}), { get: () => Promise.resolve(library) });
      for (const [i, text] of CASES.entries()) {
        const outcome = await engine.callFunction({
          applicationName: 'app',
          functionName: 'echo',
          payload: `{"value": ${text}}`,
          exported: true,
          timeoutMs: 60_000,
        });
        expect([text, outcome]).toEqual([text, { status: 'succeeded', value: verdicts[i].json }]);
      }
    } finally {
      await engine.stop();
    }
  });
});
