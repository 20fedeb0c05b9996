import { ApiError } from '../common/api-error';
import { renderRepresentation } from '../common/representation/rest-representation';
import {
  ErrorResultRepresentation,
  ErrorResultView,
  functionCallErrorDocument,
  functionCallText,
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

describe("a function call's payload", () => {
  it('is the text R receives', () => {
    expect(functionCallText('xml', Buffer.from('<a>ü</a>'))).toBe('<a>ü</a>');
  });

  it('is refused empty or not UTF-8 (400), naming the body or the part', () => {
    const refusal = (run: () => unknown): ApiError => {
      try {
        run();
      } catch (error) {
        return error as ApiError;
      }
      throw new Error('accepted');
    };
    const empty = refusal(() => functionCallText('json', Buffer.alloc(0)));
    expect(empty).toBeInstanceOf(ApiError);
    expect(empty.getStatus()).toBe(400);
    expect(empty.message).toBe(
      'The request body is empty; send the JSON payload of the function call.',
    );
    const binary = refusal(() =>
      functionCallText('xml', Buffer.from([0x3c, 0xff, 0xfe]), 'The payload "call.xml"'),
    );
    expect(binary.getStatus()).toBe(400);
    expect(binary.message).toBe('The payload "call.xml" is not UTF-8 text.');
  });
});
