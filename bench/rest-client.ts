/** The few REST calls the benchmark makes, with fetch (loopback only). */
import { XMLParser } from 'fast-xml-parser';

export const APPLICATION = 'bench';
export const JOBS_PATH = '/svc/api/rest/jobs';

const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: '',
  removeNSPrefix: true,
});

/** The attributes of the root element `element` of an XML answer. */
export function rootAttributes(xml: string, element: string): Record<string, string> {
  const parsed = parser.parse(xml) as Record<string, Record<string, string> | undefined>;
  const root = parsed[element];
  if (!root) {
    throw new Error(`expected a <${element}> answer, got: ${xml.slice(0, 300)}`);
  }
  return root;
}

export const SUBMIT_HEADERS = {
  'Content-Type': 'application/zip',
  'X-SVC-Application-Name': APPLICATION,
} as const;

export interface Submitted {
  jobId: string;
  resultUri: string;
  /** Wall clock (Date.now()) when the request was started. */
  sentAt: number;
  /** performance.now() when the request was started and when the 202 arrived. */
  sentMark: number;
  ackMark: number;
}

export async function submitZip(baseUrl: string, zip: Buffer): Promise<Submitted> {
  const sentAt = Date.now();
  const sentMark = performance.now();
  const response = await fetch(`${baseUrl}${JOBS_PATH}`, {
    method: 'POST',
    headers: SUBMIT_HEADERS,
    body: zip,
  });
  const text = await response.text();
  const ackMark = performance.now();
  if (response.status !== 202) {
    throw new Error(`submission answered ${response.status}: ${text.slice(0, 300)}`);
  }
  const token = rootAttributes(text, 'jobToken');
  return { jobId: token.jobId, resultUri: token.resultUri, sentAt, sentMark, ackMark };
}

/** The result if it is ready (and successful), null while the service answers 404. */
export async function fetchResult(resultUri: string): Promise<Record<string, string> | null> {
  const response = await fetch(resultUri);
  const text = await response.text();
  if (response.status === 404) {
    return null;
  }
  if (response.status !== 200) {
    throw new Error(`${resultUri} answered ${response.status}: ${text.slice(0, 300)}`);
  }
  const result = rootAttributes(text, 'result');
  if (result.success !== 'true') {
    throw new Error(`the job behind ${resultUri} failed: ${text.slice(0, 500)}`);
  }
  return result;
}

/** The job's status (state, submissionTime, startTime, finishTime as ISO strings). */
export async function fetchStatus(baseUrl: string, jobId: string): Promise<Record<string, string>> {
  const response = await fetch(`${baseUrl}${JOBS_PATH}/${APPLICATION}/${jobId}`);
  const text = await response.text();
  if (response.status !== 200) {
    throw new Error(`status of ${jobId} answered ${response.status}: ${text.slice(0, 300)}`);
  }
  return rootAttributes(text, 'jobStatus');
}
