import {
  ErrorResultView,
  JobTokenView,
  NodeInformationView,
  RestFormat,
  ResultView,
  ResultsStreamWriter,
  renderErrorResultJson,
  renderRepresentation,
} from './rest-representation';

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

const token: JobTokenView = {
  jobId: '8a0f8c3e-2b1d-4c5e-9f00-1234567890ab',
  applicationName: 'demo',
  submissionTime: T,
  applicationResultsUri: `${BASE}/results/demo`,
  resultUri: `${BASE}/results/demo/8a0f8c3e-2b1d-4c5e-9f00-1234567890ab`,
};

const nodeInfo: NodeInformationView = {
  name: 'node-1',
  healthy: true,
  uptime: 12345.678,
  uptimeText: '12 seconds',
  serverInfo: 'svc/0.1.0 (Node.js v20)',
  version: '0.1.0',
  rEngine: 'webr',
  rSandbox: 'webassembly',
  rVersion: 'R version 4.4.1',
  maxMemory: 4294967296,
  freeMemory: 1073741824,
  osLoadAverage: 0.25,
};

describe('renderRepresentation, JSON (Jettison mapped)', () => {
  it('renders a jobToken with every value a string', () => {
    expect(JSON.parse(renderRepresentation({ element: 'jobToken', value: token }, 'json'))).toEqual(
      {
        jobToken: { ...token, submissionTime: '2026-11-22T09:16:22.123Z' },
      },
    );
  });

  it('renders a result with success as a JSON boolean, in attribute order', () => {
    const r = result(2);
    expect(renderRepresentation({ element: 'result', value: r }, 'json')).toBe(
      `{"result":{"jobId":"${r.jobId}","applicationName":"demo",` +
        `"resultTime":"2026-11-22T09:16:22.125Z","success":true,"type":"zip",` +
        `"selfUri":"${r.selfUri}","dataUri":"${r.dataUri}"}}`,
    );
  });

  it('renders no results as "", one as an object, several as an array', () => {
    const render = (list: ResultView[]): unknown =>
      JSON.parse(renderRepresentation({ element: 'results', value: list }, 'json'));
    expect(render([])).toEqual({ results: '' });
    expect(render([result(1)])).toEqual({
      results: { result: expect.objectContaining({ jobId: result(1).jobId, success: false }) },
    });
    const two = render([result(1), result(2)]) as { results: { result: unknown[] } };
    expect(Array.isArray(two.results.result)).toBe(true);
    expect(two.results.result).toHaveLength(2);
  });

  it('renders an error with a numeric status and the message as a string', () => {
    expect(
      renderRepresentation(
        { element: 'error', value: { status: 400, error: 'Bad Request', message: 'no "app"' } },
        'json',
      ),
    ).toBe('{"error":{"status":400,"error":"Bad Request","message":"no \\"app\\""}}');
  });

  it('renders a jobStatus, omitting absent times and keeping attempts a number', () => {
    const json = JSON.parse(
      renderRepresentation(
        {
          element: 'jobStatus',
          value: {
            jobId: token.jobId,
            applicationName: 'demo',
            state: 'QUEUED',
            submissionTime: T,
            startTime: null,
            attempts: 0,
            resultUri: token.resultUri,
          },
        },
        'json',
      ),
    );
    expect(json).toEqual({
      jobStatus: {
        jobId: token.jobId,
        applicationName: 'demo',
        state: 'QUEUED',
        submissionTime: '2026-11-22T09:16:22.123Z',
        attempts: 0,
        resultUri: token.resultUri,
      },
    });
  });

  it('renders nodeInformation with booleans and numbers as primitives, longs whole', () => {
    const json = JSON.parse(
      renderRepresentation({ element: 'nodeInformation', value: nodeInfo }, 'json'),
    );
    expect(json.nodeInformation).toEqual({ ...nodeInfo, uptime: 12345 });
  });

  it('renders catalog directories and files by the one-object-vs-array rule', () => {
    const json = JSON.parse(
      renderRepresentation(
        {
          element: 'catalog',
          value: {
            directories: [
              { type: 'R_SCRIPTS', files: [{ name: 'a.R', dataUri: `${BASE}/a.R` }] },
              {
                type: 'R_FUNCTIONS',
                files: [
                  { name: 'f.R', dataUri: `${BASE}/f.R` },
                  { name: 'g.R', dataUri: `${BASE}/g.R` },
                ],
              },
              { type: 'EMAIL_REPLIES', files: [] },
            ],
          },
        },
        'json',
      ),
    );
    expect(json).toEqual({
      catalog: {
        directory: [
          { type: 'R_SCRIPTS', file: { name: 'a.R', dataUri: `${BASE}/a.R` } },
          {
            type: 'R_FUNCTIONS',
            file: [
              { name: 'f.R', dataUri: `${BASE}/f.R` },
              { name: 'g.R', dataUri: `${BASE}/g.R` },
            ],
          },
          { type: 'EMAIL_REPLIES' },
        ],
      },
    });
    expect(renderRepresentation({ element: 'catalog', value: { directories: [] } }, 'json')).toBe(
      '{"catalog":""}',
    );
  });

  it('renders an errorResult wrapped, and the flat form of SPEC §5.2', () => {
    const view: ErrorResultView = {
      jobId: token.jobId,
      applicationName: 'demo',
      submissionTime: T,
      errorMessage: 'Error in f(): boom',
    };
    const flat = {
      jobId: token.jobId,
      applicationName: 'demo',
      submissionTime: '2026-11-22T09:16:22.123Z',
      errorMessage: 'Error in f(): boom',
    };
    expect(
      JSON.parse(renderRepresentation({ element: 'errorResult', value: view }, 'json')),
    ).toEqual({ errorResult: flat });
    expect(renderErrorResultJson(view)).toBe(JSON.stringify(flat));
  });
});

describe('renderRepresentation, XML', () => {
  it('renders a jobToken as attributes of a namespaced root with a declaration', () => {
    expect(renderRepresentation({ element: 'jobToken', value: token }, 'xml')).toBe(
      `${DECL}<jobToken ${NS} jobId="${token.jobId}" applicationName="demo" ` +
        `submissionTime="2026-11-22T09:16:22.123Z" ` +
        `applicationResultsUri="${token.applicationResultsUri}" resultUri="${token.resultUri}"/>`,
    );
  });

  it('renders results with un-namespaced children that inherit the default namespace', () => {
    const xml = renderRepresentation({ element: 'results', value: [result(1)] }, 'xml');
    expect(xml).toMatch(new RegExp(`^${escape(DECL)}<results ${NS}><result jobId="`));
    expect(xml).toContain('success="false"');
    expect(xml.match(/xmlns=/g)).toHaveLength(1);
    expect(renderRepresentation({ element: 'results', value: [] }, 'xml')).toBe(
      `${DECL}<results ${NS}/>`,
    );
  });

  it('puts the error message in a child element and escapes markup', () => {
    expect(
      renderRepresentation(
        { element: 'error', value: { status: 404, error: 'Not Found', message: 'a < b & "c"' } },
        'xml',
      ),
    ).toBe(
      `${DECL}<error ${NS} status="404" error="Not Found"><message>a &lt; b &amp; "c"</message></error>`,
    );
  });

  it('replaces characters XML cannot carry', () => {
    const xml = renderRepresentation(
      {
        element: 'errorResult',
        value: {
          jobId: token.jobId,
          applicationName: 'demo',
          submissionTime: T,
          errorMessage: '\u001b[31mError\u0000\ud800 ok\n',
        },
      },
      'xml',
    );
    expect(xml).toContain('<errorMessage>\ufffd[31mError\ufffd\ufffd ok\n</errorMessage>');
  });

  it('omits absent optional attributes of jobStatus', () => {
    const xml = renderRepresentation(
      {
        element: 'jobStatus',
        value: {
          jobId: token.jobId,
          applicationName: 'demo',
          state: 'RUNNING',
          submissionTime: T,
          startTime: T,
          finishTime: undefined,
          attempts: 1,
          resultUri: token.resultUri,
        },
      },
      'xml',
    );
    expect(xml).toContain('startTime="2026-11-22T09:16:22.123Z"');
    expect(xml).not.toContain('finishTime');
  });
});

describe('ResultsStreamWriter', () => {
  const formats: RestFormat[] = ['xml', 'json'];
  const sizes = [0, 1, 2, 3];

  for (const format of formats) {
    for (const size of sizes) {
      it(`writes what renderRepresentation renders: ${format}, ${size} item(s)`, () => {
        // Markup in a value checks that items are escaped as the whole document would be.
        const list = Array.from({ length: size }, (_, i) =>
          result(i + 1, { selfUri: `${BASE}/results?x="${i}"&y=<z>` }),
        );
        const chunks: string[] = [];
        const writer = new ResultsStreamWriter(format, (chunk) => chunks.push(chunk));
        list.forEach((r) => writer.add(r));
        writer.end();
        expect(chunks.join('')).toBe(
          renderRepresentation({ element: 'results', value: list }, format),
        );
      });
    }
  }

  it('writes nothing before the first item, then streams every item after the first at once', () => {
    const chunks: string[] = [];
    const writer = new ResultsStreamWriter('json', (chunk) => chunks.push(chunk));
    expect(chunks).toEqual([]);
    writer.add(result(1));
    // The first item waits: it is an object if alone, the head of an array otherwise.
    expect(chunks.join('')).toBe('{"results":{"result":');
    writer.add(result(2));
    expect(chunks.join('')).toContain(result(2).jobId);
    writer.add(result(3));
    expect(chunks.join('')).toContain(result(3).jobId);

    const xmlChunks: string[] = [];
    const xmlWriter = new ResultsStreamWriter('xml', (chunk) => xmlChunks.push(chunk));
    xmlWriter.add(result(1));
    expect(xmlChunks.join('')).toContain(result(1).jobId);
  });

  it('refuses to be used after end', () => {
    const writer = new ResultsStreamWriter('xml', () => undefined);
    writer.end();
    expect(() => writer.add(result(1))).toThrow();
    expect(() => writer.end()).toThrow();
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
