import { renderRepresentation } from '../common/representation/rest-representation';
import { JobStatusRepresentation, JobTokenRepresentation, JobTokenView } from './jobs-view';

const DECL = '<?xml version="1.0" encoding="UTF-8"?>';
const NS = 'xmlns="urn:svc:rest:types"';
const BASE = 'http://localhost:8888/svc/api/rest';
const T = new Date('2026-11-22T09:16:22.123Z');

const token: JobTokenView = {
  jobId: '8a0f8c3e-2b1d-4c5e-9f00-1234567890ab',
  applicationName: 'demo',
  submissionTime: T,
  applicationResultsUri: `${BASE}/results/demo`,
  resultUri: `${BASE}/results/demo/8a0f8c3e-2b1d-4c5e-9f00-1234567890ab`,
};

describe('jobToken', () => {
  it('renders in JSON with every value a string', () => {
    expect(
      JSON.parse(renderRepresentation(new JobTokenRepresentation(token), 'mapped-json')),
    ).toEqual({
      jobToken: { ...token, submissionTime: '2026-11-22T09:16:22.123Z' },
    });
  });

  it('renders in XML as attributes of a namespaced root with a declaration', () => {
    expect(renderRepresentation(new JobTokenRepresentation(token), 'xml')).toBe(
      `${DECL}<jobToken ${NS} jobId="${token.jobId}" applicationName="demo" ` +
        `submissionTime="2026-11-22T09:16:22.123Z" ` +
        `applicationResultsUri="${token.applicationResultsUri}" resultUri="${token.resultUri}"/>`,
    );
  });
});

describe('jobStatus', () => {
  it('renders in JSON, omitting absent times and keeping attempts a number', () => {
    const json = JSON.parse(
      renderRepresentation(
        new JobStatusRepresentation({
          jobId: token.jobId,
          applicationName: 'demo',
          state: 'QUEUED',
          submissionTime: T,
          startTime: null,
          attempts: 0,
          resultUri: token.resultUri,
        }),
        'mapped-json',
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

  it('omits absent optional attributes in XML', () => {
    const xml = renderRepresentation(
      new JobStatusRepresentation({
        jobId: token.jobId,
        applicationName: 'demo',
        state: 'RUNNING',
        submissionTime: T,
        startTime: T,
        finishTime: undefined,
        attempts: 1,
        resultUri: token.resultUri,
      }),
      'xml',
    );
    expect(xml).toContain('startTime="2026-11-22T09:16:22.123Z"');
    expect(xml).not.toContain('finishTime');
  });

  it('puts progress, cancellation and callback in child elements, in that order', () => {
    const xml = renderRepresentation(
      new JobStatusRepresentation({
        jobId: token.jobId,
        applicationName: 'demo',
        state: 'DONE',
        submissionTime: T,
        startTime: T,
        finishTime: T,
        attempts: 1,
        resultUri: token.resultUri,
        progress: { fraction: 0.5, message: 'half' },
        cancellation: { by: 'alice', time: T },
        callback: {
          state: 'failed',
          attempts: 3,
          lastHttpStatus: 500,
          lastError: 'HTTP 500',
          lastAttemptTime: T,
          deliveryTime: null,
        },
      }),
      'xml',
    );
    expect(xml).toContain(
      '><progress fraction="0.5" message="half"/>' +
        '<cancellation by="alice" time="2026-11-22T09:16:22.123Z"/>' +
        '<callback state="failed" attempts="3" lastHttpStatus="500" lastError="HTTP 500" ' +
        'lastAttemptTime="2026-11-22T09:16:22.123Z"/></jobStatus>',
    );
  });
});
