import { renderRepresentation } from '../common/representation/rest-representation';
import {
  ErrorResultRepresentation,
  ErrorResultView,
  functionCallErrorDocument,
} from './function-call-result';

const JOB_ID = '8a0f8c3e-2b1d-4c5e-9f00-1234567890ab';
const T = new Date('2026-11-22T09:16:22.123Z');

describe('errorResult', () => {
  it('renders wrapped in vnd+json, and flat (plain JSON) for a failed JSON call', () => {
    const view: ErrorResultView = {
      jobId: JOB_ID,
      applicationName: 'demo',
      submissionTime: T,
      errorMessage: 'Error in f(): boom',
    };
    const flat = {
      jobId: JOB_ID,
      applicationName: 'demo',
      submissionTime: '2026-11-22T09:16:22.123Z',
      errorMessage: 'Error in f(): boom',
    };
    expect(
      JSON.parse(renderRepresentation(new ErrorResultRepresentation(view), 'mapped-json')),
    ).toEqual({ errorResult: flat });
    expect(functionCallErrorDocument('json', view, view.errorMessage)).toBe(JSON.stringify(flat));
  });

  it('is the errorResult document for a failed XML call, replacing characters XML cannot carry', () => {
    const xml = functionCallErrorDocument(
      'xml',
      { jobId: JOB_ID, applicationName: 'demo', submissionTime: T },
      '\u001b[31mError\u0000\ud800 ok\n',
    );
    expect(xml).toContain('<errorMessage>\ufffd[31mError\ufffd\ufffd ok\n</errorMessage>');
    expect(xml).toBe(
      renderRepresentation(
        new ErrorResultRepresentation({
          jobId: JOB_ID,
          applicationName: 'demo',
          submissionTime: T,
          errorMessage: '\u001b[31mError\u0000\ud800 ok\n',
        }),
        'xml',
      ),
    );
  });
});
