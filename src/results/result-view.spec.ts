import {
  RestFormat,
  RestListStreamWriter,
  renderRepresentation,
} from '../common/representation/rest-representation';
import { ResultRepresentation, ResultsRepresentation, ResultView } from './result-view';

const DECL = '<?xml version="1.0" encoding="UTF-8"?>';
const NS = 'xmlns="urn:svc:rest:types"';
const BASE = 'http://localhost:8888/svc/api/rest';
const T = new Date('2026-11-22T09:16:22.123Z');

function result(n: number, overrides: Partial<ResultView> = {}): ResultView {
  const jobId = `00000000-0000-4000-8000-00000000000${n}`;
  return {
    jobId,
    applicationName: 'demo',
    resultTime: new Date(T.getTime() + n),
    success: n % 2 === 0,
    type: 'zip',
    selfUri: `${BASE}/results/demo/${jobId}`,
    dataUri: `${BASE}/result/demo/${jobId}.zip`,
    ...overrides,
  };
}

describe('result and results in mapped JSON (vnd+json)', () => {
  it('renders a result with success as a JSON boolean, in attribute order', () => {
    const r = result(2);
    expect(renderRepresentation(new ResultRepresentation(r), 'mapped-json')).toBe(
      `{"result":{"jobId":"${r.jobId}","applicationName":"demo",` +
        `"resultTime":"2026-11-22T09:16:22.125Z","success":true,"type":"zip",` +
        `"selfUri":"${r.selfUri}","dataUri":"${r.dataUri}"}}`,
    );
  });

  it('renders no results as "", one as an object, several as an array', () => {
    const render = (list: ResultView[]): unknown =>
      JSON.parse(renderRepresentation(new ResultsRepresentation(list), 'mapped-json'));
    expect(render([])).toEqual({ results: '' });
    expect(render([result(1)])).toEqual({
      results: { result: expect.objectContaining({ jobId: result(1).jobId, success: false }) },
    });
    const two = render([result(1), result(2)]) as { results: { result: unknown[] } };
    expect(Array.isArray(two.results.result)).toBe(true);
    expect(two.results.result).toHaveLength(2);
  });
});

describe('result and results in plain JSON (application/json)', () => {
  it('renders a result as its attributes, typed, with no name around them', () => {
    const r = result(2);
    expect(JSON.parse(renderRepresentation(new ResultRepresentation(r), 'json'))).toEqual({
      jobId: r.jobId,
      applicationName: 'demo',
      resultTime: '2026-11-22T09:16:22.125Z',
      success: true,
      type: 'zip',
      selfUri: r.selfUri,
      dataUri: r.dataUri,
    });
  });

  it('renders results as an array, even of none or one', () => {
    const render = (list: ResultView[]): { results: { jobId: string }[] } =>
      JSON.parse(renderRepresentation(new ResultsRepresentation(list), 'json')) as {
        results: { jobId: string }[];
      };
    expect(render([])).toEqual({ results: [] });
    expect(render([result(1)]).results.map((r) => r.jobId)).toEqual([result(1).jobId]);
    expect(render([result(1), result(2)]).results).toHaveLength(2);
  });
});

describe('results in XML', () => {
  it('renders results with un-namespaced children that inherit the default namespace', () => {
    const xml = renderRepresentation(new ResultsRepresentation([result(1)]), 'xml');
    expect(xml).toMatch(new RegExp(`^${escape(DECL)}<results ${NS}><result jobId="`));
    expect(xml).toContain('success="false"');
    expect(xml.match(/xmlns=/g)).toHaveLength(1);
    expect(renderRepresentation(new ResultsRepresentation([]), 'xml')).toBe(
      `${DECL}<results ${NS}/>`,
    );
  });
});

describe('results streamed as the listing writes them', () => {
  const formats: RestFormat[] = ['xml', 'mapped-json', 'json'];
  const sizes = [0, 1, 2, 3];

  for (const format of formats) {
    for (const size of sizes) {
      it(`writes what renderRepresentation renders: ${format}, ${size} item(s)`, () => {
        // Markup in a value checks that items are escaped as the whole document would be.
        const list = Array.from({ length: size }, (_, i) =>
          result(i + 1, { selfUri: `${BASE}/results?x="${i}"&y=<z>` }),
        );
        const chunks: string[] = [];
        const writer = new RestListStreamWriter(
          new ResultsRepresentation([]).toElement(),
          format,
          (chunk) => chunks.push(chunk),
        );
        list.forEach((r) => writer.add(new ResultRepresentation(r)));
        writer.end();
        expect(chunks.join('')).toBe(renderRepresentation(new ResultsRepresentation(list), format));
      });
    }
  }
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
