import { XMLParser } from 'fast-xml-parser';

const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: '',
  removeNSPrefix: true,
});

/** Parses an XML answer into plain objects (attributes as keys), for assertions. */
export function parseXml(xml: string): Record<string, Record<string, string>> {
  return parser.parse(xml) as Record<string, Record<string, string>>;
}

export interface Answer {
  status: number;
  headers: Headers;
  body: Buffer;
  text: string;
}

/** One HTTP request with fetch; the body is read whole. */
export async function request(url: string, init: RequestInit = {}): Promise<Answer> {
  const response = await fetch(url, { redirect: 'manual', ...init });
  const body = Buffer.from(await response.arrayBuffer());
  return { status: response.status, headers: response.headers, body, text: body.toString('utf8') };
}

export const REST = '/svc/api/rest';

/** Posts a ZIP job as application/zip. */
export async function postZip(
  base: string,
  zip: Buffer,
  headers: Record<string, string> = {},
): Promise<Answer> {
  return request(`${base}${REST}/jobs`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/zip', 'X-SVC-Application-Name': 'demo', ...headers },
    body: zip,
  });
}

/** Polls a resultUri until it answers 200; returns that answer. */
export async function waitForResult(
  resultUri: string,
  headers: Record<string, string> = {},
  timeoutMs = 90000,
): Promise<Answer> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answer = await request(resultUri, { headers });
    if (answer.status === 200) {
      return answer;
    }
    if (answer.status !== 404 || Date.now() > deadline) {
      throw new Error(`result at ${resultUri}: ${answer.status} ${answer.text}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
