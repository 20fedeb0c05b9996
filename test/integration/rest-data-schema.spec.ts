import { CatalogRepresentation } from '../../src/admin/catalog-view';
import { ErrorRepresentation } from '../../src/common/representation/error-view';
import {
  RestView,
  renderRepresentation,
} from '../../src/common/representation/rest-representation';
import { ErrorResultRepresentation } from '../../src/job-core/function-call-result';
import { JobStatusRepresentation, JobTokenRepresentation } from '../../src/jobs/jobs-view';
import { PackagesRepresentation } from '../../src/packages/packages-view';
import {
  ResultRepresentation,
  ResultsRepresentation,
  ResultView,
} from '../../src/results/result-view';
import { NodeInformationRepresentation } from '../../src/system/system-view';
import { UsageStatisticsRepresentation } from '../../src/usage/usage-view';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { validateAgainstSchema } from '../support/xml-schema';

/** Drift check: every XML representation the REST API renders validates against rest-data.xsd. */

const XSD = 'rest-data.xsd';
const BASE = 'https://svc.example.com/svc/api/rest';
const JOB_ID = '8a0f8c3e-2b1d-4c5e-9f00-1234567890ab';
const T = new Date('2026-11-22T09:16:22.123Z');

function result(n: number, success: boolean, type: string): ResultView {
  const jobId = `00000000-0000-4000-8000-00000000000${n}`;
  return {
    jobId,
    applicationName: 'demo_App1',
    resultTime: T,
    success,
    type,
    selfUri: `${BASE}/results/demo_App1/${jobId}`,
    dataUri: `${BASE}/result/demo_App1/${jobId}.${type}`,
  };
}

const cases: [string, RestView][] = [
  [
    'jobToken',
    new JobTokenRepresentation({
      jobId: JOB_ID,
      applicationName: 'demo',
      submissionTime: T,
      applicationResultsUri: `${BASE}/results/demo`,
      resultUri: `${BASE}/results/demo/${JOB_ID}`,
    }),
  ],
  ['result', new ResultRepresentation(result(1, true, 'zip'))],
  ['results, none', new ResultsRepresentation([])],
  ['results, one', new ResultsRepresentation([result(1, false, 'txt')])],
  [
    'results, several',
    new ResultsRepresentation([result(1, true, 'json'), result(2, true, 'xml')]),
  ],
  [
    'error',
    new ErrorRepresentation({
      status: 415,
      error: 'Unsupported Media Type',
      message: 'text/plain <is> not "ok" & so',
    }),
  ],
  [
    'jobStatus, queued',
    new JobStatusRepresentation({
      jobId: JOB_ID,
      applicationName: 'demo',
      state: 'QUEUED',
      submissionTime: T,
      startTime: null,
      finishTime: null,
      attempts: 0,
      resultUri: `${BASE}/results/demo/${JOB_ID}`,
    }),
  ],
  [
    'jobStatus, done',
    new JobStatusRepresentation({
      jobId: JOB_ID,
      applicationName: 'demo',
      state: 'DONE',
      submissionTime: T,
      startTime: new Date(T.getTime() + 5),
      finishTime: new Date(T.getTime() + 900),
      attempts: 2,
      resultUri: `${BASE}/results/demo/${JOB_ID}`,
    }),
  ],
  [
    'jobStatus, running, with progress',
    new JobStatusRepresentation({
      jobId: JOB_ID,
      applicationName: 'demo',
      state: 'RUNNING',
      submissionTime: T,
      startTime: new Date(T.getTime() + 5),
      attempts: 1,
      resultUri: `${BASE}/results/demo/${JOB_ID}`,
      progress: { fraction: 0.4, message: 'fitting the model <&>' },
    }),
  ],
  [
    'jobStatus, cancelled',
    new JobStatusRepresentation({
      jobId: JOB_ID,
      applicationName: 'demo',
      state: 'DONE',
      submissionTime: T,
      startTime: new Date(T.getTime() + 5),
      finishTime: new Date(T.getTime() + 700),
      attempts: 1,
      resultUri: `${BASE}/results/demo/${JOB_ID}`,
      cancellation: { by: 'alice <&>', time: new Date(T.getTime() + 700) },
    }),
  ],
  [
    'jobStatus, done, with its callback failed',
    new JobStatusRepresentation({
      jobId: JOB_ID,
      applicationName: 'demo',
      state: 'DONE',
      submissionTime: T,
      startTime: new Date(T.getTime() + 5),
      finishTime: new Date(T.getTime() + 900),
      attempts: 1,
      resultUri: `${BASE}/results/demo/${JOB_ID}`,
      callback: {
        state: 'failed',
        attempts: 5,
        lastHttpStatus: 502,
        lastError: 'HTTP 502 <&>',
        lastAttemptTime: new Date(T.getTime() + 60_000),
        deliveryTime: null,
      },
    }),
  ],
  [
    'jobStatus, queued, its callback pending',
    new JobStatusRepresentation({
      jobId: JOB_ID,
      applicationName: 'demo',
      state: 'QUEUED',
      submissionTime: T,
      attempts: 0,
      resultUri: `${BASE}/results/demo/${JOB_ID}`,
      callback: {
        state: 'pending',
        attempts: 0,
        lastHttpStatus: null,
        lastError: null,
        lastAttemptTime: null,
        deliveryTime: null,
      },
    }),
  ],
  [
    'errorResult, with characters XML cannot carry',
    new ErrorResultRepresentation({
      jobId: JOB_ID,
      applicationName: 'demo',
      submissionTime: T,
      errorMessage: 'Error in svcXmlService(x): \u001b[1mboom\u0000\nline 2 <&>',
    }),
  ],
  [
    'nodeInformation',
    new NodeInformationRepresentation({
      name: 'worker-1.example.com',
      healthy: false,
      uptime: 86_400_123.4,
      uptimeText: '1 day, 0 hours, 0 minutes',
      serverInfo: 'svc/0.1.0 Node.js/v20.20.2 linux x64',
      version: '0.1.0',
      rEngine: 'native',
      rVersion: 'R version 4.4.1 (2024-06-14)',
      rSandbox: 'bwrap',
      maxMemory: 8_589_934_592,
      freeMemory: 123_456_789,
      osLoadAverage: 1.5,
    }),
  ],
  ['catalog, empty', new CatalogRepresentation({ directories: [] })],
  [
    'catalog',
    new CatalogRepresentation({
      directories: [
        {
          type: 'R_SCRIPTS',
          files: [{ name: 'run.R', dataUri: `${BASE}/admin/catalog/R_SCRIPTS/run.R` }],
        },
        { type: 'SWEAVE_FILES', files: [] },
        { type: 'JOB_CONFIGURATIONS', files: [] },
        {
          type: 'R_FUNCTIONS',
          files: [
            { name: 'json.R', dataUri: `${BASE}/admin/catalog/R_FUNCTIONS/json.R` },
            { name: 'xml.R', dataUri: `${BASE}/admin/catalog/R_FUNCTIONS/xml.R` },
          ],
        },
        { type: 'EMAIL_REPLIES', files: [] },
      ],
    }),
  ],
  ['packages, none', new PackagesRepresentation([])],
  [
    'packages',
    new PackagesRepresentation([
      {
        applicationName: 'demo',
        name: 'svc.demo',
        version: '1.0-2',
        sha256: 'a'.repeat(64),
        installedBy: 'admin',
        installedTime: T,
        nodes: [
          { node: 'host-a:12:0f3c9a1b', state: 'installed', reportedTime: T, output: null },
          {
            node: 'host-b:7:77aa0c12',
            state: 'failed',
            reportedTime: T,
            output: "ERROR: dependency 'x' is not available for package 'svc.demo'",
          },
          { node: 'host-c:9:1234abcd', state: 'pending', reportedTime: T, output: null },
        ],
      },
      {
        applicationName: 'demo',
        name: 'other',
        version: '0.1',
        sha256: 'b'.repeat(64),
        installedBy: 'anonymous',
        installedTime: T,
        nodes: [],
      },
    ]),
  ],
  [
    'usageStatistics, none',
    new UsageStatisticsRepresentation({ from: '2026-01', to: '2026-01', months: [] }),
  ],
  [
    'usageStatistics',
    new UsageStatisticsRepresentation({
      from: '2026-10',
      to: '2026-11',
      months: [
        {
          application: 'demo',
          month: '2026-10',
          submitted: 3,
          succeeded: 2,
          failed: 1,
          cancelled: 0,
          runTimeTotalMs: 4_500,
          runTimeP50Ms: 1_200,
          runTimeP95Ms: 2_900,
          waitTimeP50Ms: 15,
          waitTimeP95Ms: 40,
          rCpuTotalMs: 3_100,
          rCpuJobs: 3,
          bytesIn: 2_048,
          bytesOut: 10_240,
        },
        {
          application: 'other',
          month: '2026-11',
          submitted: 1,
          succeeded: 0,
          failed: 0,
          cancelled: 1,
          runTimeTotalMs: 0,
          runTimeP50Ms: null,
          runTimeP95Ms: null,
          waitTimeP50Ms: null,
          waitTimeP95Ms: null,
          rCpuTotalMs: 0,
          rCpuJobs: 0,
          bytesIn: 12,
          bytesOut: 0,
        },
      ],
    }),
  ],
];

/** The classes in src/ that implement RestView: each feature's views. */
function viewClasses(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      return viewClasses(path);
    }
    if (!entry.name.endsWith('.ts') || entry.name.endsWith('.spec.ts')) {
      return [];
    }
    const text = readFileSync(path, 'utf8');
    return [...text.matchAll(/class (\w+) implements RestView\b/g)].map((match) => match[1]);
  });
}

describe('rest-data.xsd', () => {
  it('has a case for every view in src/', () => {
    const covered = new Set(cases.map(([, rep]) => rep.constructor.name));
    const views = viewClasses(join(__dirname, '..', '..', 'src'));
    expect(views.length).toBeGreaterThanOrEqual(10);
    expect(views.filter((name) => !covered.has(name))).toEqual([]);
  });

  it('covers every element kind', () => {
    const kinds = new Set(cases.map(([, rep]) => rep.toElement().name));
    expect([...kinds].sort()).toEqual(
      [
        'catalog',
        'error',
        'errorResult',
        'jobStatus',
        'jobToken',
        'nodeInformation',
        'packages',
        'result',
        'results',
        'usageStatistics',
      ].sort(),
    );
  });

  it.each(cases)('accepts the rendered %s', async (_name, rep) => {
    const xml = renderRepresentation(rep, 'xml');
    await expect(validateAgainstSchema(xml, XSD)).resolves.toEqual({ valid: true, errors: [] });
  });

  describe('rejects', () => {
    const token = renderRepresentation(cases[0][1], 'xml');

    it.each([
      ['an unknown attribute', token.replace('<jobToken ', '<jobToken colour="red" ')],
      ['a job id that is not a UUID', token.replace(JOB_ID, 'not-a-uuid')],
      ['a time that is not xs:dateTime', token.replace('2026-11-22T09:16:22.123Z', 'yesterday')],
      ['a missing required attribute', token.replace(/ resultUri="[^"]*"/, '')],
      ['the wrong namespace', token.replace('urn:svc:rest:types', 'urn:other')],
      [
        'a duplicated catalog section',
        renderRepresentation(
          new CatalogRepresentation({
            directories: [
              { type: 'R_SCRIPTS', files: [] },
              { type: 'R_SCRIPTS', files: [] },
            ],
          }),
          'xml',
        ),
      ],
      [
        'an unknown catalog section',
        renderRepresentation(
          new CatalogRepresentation({ directories: [{ type: 'DATA', files: [] }] }),
          'xml',
        ),
      ],
    ])('%s', async (_name, xml) => {
      const outcome = await validateAgainstSchema(xml, XSD);
      expect(outcome.valid).toBe(false);
      expect(outcome.errors.length).toBeGreaterThan(0);
    });
  });
});
