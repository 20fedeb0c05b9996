import { STATUS_CODES } from 'node:http';
import { REST_PREFIX, RestLinks } from '../common/public-uri';
import {
  renderErrorResultJson,
  renderRepresentation,
  RestRepresentation,
  ResultView,
} from '../common/representation/rest-representation';
import type { ExampleObject } from './openapi-objects';

/**
 * Examples of every representation, rendered by the service's own renderer from sample values:
 * what a client sees is what the document shows, and the unit test checks them against the XSD
 * and the JSON Schemas.
 */

const JOB_ID = '3f6c1a52-8d0e-4b7a-9c1e-2b5d7f4e9a10';
const OTHER_JOB_ID = '9b2e4d61-0c3a-4f58-8e7d-1a6b3c5d7e92';
const APP = 'demo';
const SUBMITTED = new Date('2026-11-22T09:16:20.123Z');
const STARTED = new Date('2026-11-22T09:16:20.456Z');
const FINISHED = new Date('2026-11-22T09:16:23.456Z');

export interface RepresentationExample {
  summary: string;
  representation: RestRepresentation;
}

export class RepresentationExamples {
  private readonly links: RestLinks;

  constructor(private readonly baseUrl: string) {
    this.links = new RestLinks(baseUrl);
  }

  private resultView(jobId: string, success: boolean, type: string): ResultView {
    return {
      jobId,
      applicationName: APP,
      resultTime: FINISHED,
      success,
      type,
      selfUri: this.links.result(APP, jobId),
      dataUri: this.links.resultData(APP, jobId, type),
    };
  }

  jobToken(): RepresentationExample[] {
    return [
      {
        summary: 'A job accepted',
        representation: {
          element: 'jobToken',
          value: {
            jobId: JOB_ID,
            applicationName: APP,
            submissionTime: SUBMITTED,
            applicationResultsUri: this.links.applicationResults(APP),
            resultUri: this.links.result(APP, JOB_ID),
          },
        },
      },
    ];
  }

  jobStatus(): RepresentationExample[] {
    const status = {
      jobId: JOB_ID,
      applicationName: APP,
      submissionTime: SUBMITTED,
      attempts: 1,
      resultUri: this.links.result(APP, JOB_ID),
    };
    return [
      {
        summary: 'Queued',
        representation: {
          element: 'jobStatus',
          value: { ...status, state: 'QUEUED', attempts: 0 },
        },
      },
      {
        summary: 'Running, with progress',
        representation: {
          element: 'jobStatus',
          value: {
            ...status,
            state: 'RUNNING',
            startTime: STARTED,
            progress: { fraction: 0.4, message: 'fitting the model' },
          },
        },
      },
      {
        summary: 'Cancelled',
        representation: {
          element: 'jobStatus',
          value: {
            ...status,
            state: 'DONE',
            startTime: STARTED,
            finishTime: FINISHED,
            cancellation: { by: 'anonymous', time: FINISHED },
          },
        },
      },
    ];
  }

  result(): RepresentationExample[] {
    return [
      {
        summary: 'A successful job',
        representation: { element: 'result', value: this.resultView(JOB_ID, true, 'zip') },
      },
    ];
  }

  results(): RepresentationExample[] {
    const one = this.resultView(JOB_ID, true, 'zip');
    const two = this.resultView(OTHER_JOB_ID, false, 'txt');
    return [
      { summary: 'None', representation: { element: 'results', value: [] } },
      { summary: 'One (an object in JSON)', representation: { element: 'results', value: [one] } },
      {
        summary: 'Several (an array in JSON)',
        representation: { element: 'results', value: [one, two] },
      },
    ];
  }

  nodeInformation(): RepresentationExample[] {
    return [
      {
        summary: 'A node running native R',
        representation: {
          element: 'nodeInformation',
          value: {
            name: 'host:4242',
            healthy: true,
            uptime: 8176,
            uptimeText: '8 s',
            serverInfo: 'svc/0.1.0 (Node.js v20.20.2; linux x64; role all)',
            version: '0.1.0',
            rEngine: 'native',
            rVersion: 'R version 4.2.2 Patched (2022-11-10 r83330)',
            rSandbox: 'bwrap',
            maxMemory: 25276510208,
            freeMemory: 24056385536,
            osLoadAverage: 1.88,
          },
        },
      },
    ];
  }

  catalog(): RepresentationExample[] {
    const sections = ['R_SCRIPTS', 'SWEAVE_FILES', 'JOB_CONFIGURATIONS', 'R_FUNCTIONS'];
    const fileUri = (section: string, name: string): string =>
      `${this.baseUrl}${REST_PREFIX}/admin/catalog/${section}/${name}`;
    return [
      {
        summary: 'One script, two functions, other sections empty',
        representation: {
          element: 'catalog',
          value: {
            directories: [
              ...sections.map((type) => ({
                type,
                files:
                  type === 'R_SCRIPTS'
                    ? [{ name: 'summary.R', dataUri: fileUri(type, 'summary.R') }]
                    : type === 'R_FUNCTIONS'
                      ? ['a.R', 'b.R'].map((name) => ({ name, dataUri: fileUri(type, name) }))
                      : [],
              })),
              { type: 'EMAIL_REPLIES', files: [] },
            ],
          },
        },
      },
    ];
  }

  packages(): RepresentationExample[] {
    const time = new Date('2026-11-25T10:00:00.000Z');
    return [
      {
        summary: 'One package, installed on one node, failed on another',
        representation: {
          element: 'packages',
          value: [
            {
              applicationName: APP,
              name: 'mytools',
              version: '1.2.0',
              sha256: '9f2c4be1d1c0a6d3e1f4b5a6c7d8e9f00112233445566778899aabbccddeeff0',
              installedBy: 'admin',
              installedTime: time,
              nodes: [
                {
                  node: 'node-a:4242:1f2e3d4c',
                  state: 'installed',
                  reportedTime: time,
                  output: null,
                },
                {
                  node: 'node-b:977:5a6b7c8d',
                  state: 'failed',
                  reportedTime: time,
                  output:
                    "* installing *source* package 'mytools' ...\nERROR: dependency 'jsonlite' is not available for package 'mytools'",
                },
              ],
            },
          ],
        },
      },
      { summary: 'No packages', representation: { element: 'packages', value: [] } },
    ];
  }

  usageStatistics(): RepresentationExample[] {
    const month = {
      application: APP,
      month: '2026-11',
      submitted: 4,
      succeeded: 2,
      failed: 1,
      cancelled: 1,
      runTimeTotalMs: 1371,
      runTimeP50Ms: 68,
      runTimeP95Ms: 1019,
      waitTimeP50Ms: 12,
      waitTimeP95Ms: 240,
      rCpuTotalMs: 312,
      rCpuJobs: 3,
      bytesIn: 10975,
      bytesOut: 1234,
    };
    return [
      {
        summary: 'One application, one month',
        representation: {
          element: 'usageStatistics',
          value: { from: '2026-11', to: '2026-11', months: [month] },
        },
      },
      {
        summary: 'Two months, the first without a started job',
        representation: {
          element: 'usageStatistics',
          value: {
            from: '2026-10',
            to: '2026-11',
            months: [
              {
                ...month,
                month: '2026-10',
                submitted: 1,
                succeeded: 0,
                failed: 0,
                runTimeTotalMs: 0,
                runTimeP50Ms: null,
                runTimeP95Ms: null,
                waitTimeP50Ms: null,
                waitTimeP95Ms: null,
                rCpuTotalMs: 0,
                rCpuJobs: 0,
                bytesIn: 27,
                bytesOut: 120,
              },
              month,
            ],
          },
        },
      },
    ];
  }

  error(status: number, message: string): RepresentationExample[] {
    return [
      {
        summary: `${status} ${STATUS_CODES[status] ?? 'Error'}`,
        representation: {
          element: 'error',
          value: { status, error: STATUS_CODES[status] ?? 'Error', message },
        },
      },
    ];
  }

  errorResult(): RepresentationExample[] {
    return [
      {
        summary: 'The function failed',
        representation: {
          element: 'errorResult',
          value: {
            jobId: JOB_ID,
            applicationName: APP,
            submissionTime: SUBMITTED,
            errorMessage: 'Error in svcJsonService(payload): the analysis failed',
          },
        },
      },
    ];
  }
}

/** The examples of a media type: each sample rendered as XML or as JSON. */
export function renderedExamples(
  samples: RepresentationExample[],
  format: 'xml' | 'json',
): Record<string, ExampleObject> {
  return Object.fromEntries(
    samples.map((sample, index) => [
      `example${index + 1}`,
      {
        summary: sample.summary,
        value:
          format === 'xml'
            ? renderRepresentation(sample.representation, 'xml')
            : sample.representation.element === 'errorResult'
              ? (JSON.parse(renderErrorResultJson(sample.representation.value)) as unknown)
              : (JSON.parse(renderRepresentation(sample.representation, 'json')) as unknown),
      },
    ]),
  );
}
