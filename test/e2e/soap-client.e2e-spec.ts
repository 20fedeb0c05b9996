/**
 * SOAP 1.1 + MTOM through a real SOAP client built from the WSDL.
 *
 * @ci-pass embedded
 * @ci-pass node24
 */
import type { Client } from 'soap';
import { explodeZip } from '../../src/jobs/job-archive';
import { loadTestCatalog } from '../support/function-calls';
import { REST, request } from '../support/rest-client';
import {
  envelopeErrors,
  generatedClient,
  inlineXop,
  MimePart,
  processMethod,
  SOAP_PATH,
  XOP_NS,
} from '../support/soap-client';
import { startTestService, TestService } from '../support/test-service';
import { makeZip } from '../support/zip-fixtures';

const PLOT_SCRIPT = `
pdf("plot.pdf")
plot(1:10, main = "svc")
invisible(dev.off())
writeLines(c("mean", as.character(mean(read.csv("data.csv")$x))), "summary.txt")
`;

interface ClientPayload {
  name: string;
  contentType: string;
  data: Buffer;
}

interface ClientResult {
  applicationName: string;
  jobId: string;
  success: boolean;
  payloads: ClientPayload[];
}

interface Attachments {
  parts: Array<{ headers: Record<string, string>; body: Buffer }>;
}

interface ParsedPayload {
  attributes: { name: string; contentType: string };
  data: unknown;
}

/** The attachment an xop:Include in a parsed `data` refers to (node-soap leaves XOP to the caller). */
function attachmentOf(data: unknown, attachments: Attachments): Buffer {
  const href = /cid:([^"]+)/.exec(JSON.stringify(data))?.[1];
  const contentId = href && decodeURIComponent(href);
  const part = attachments.parts.find((p) => p.headers['content-id'] === `<${contentId}>`);
  if (!part) {
    throw new Error(`no attachment for ${JSON.stringify(data)}`);
  }
  return part.body;
}

/**
 * Calls Process with the generated client; checks the answer envelope (XOP inlined) against the
 * SOAP envelope and soap-data.xsd, and returns the result with each payload's bytes.
 */
async function process(client: Client, args: unknown, options: object = {}): Promise<ClientResult> {
  const [result, rawResponse, , , attachments] = (await processMethod(client)(args, options)) as [
    { applicationName: string; jobId: string; success: boolean; payload: ParsedPayload[] },
    string,
    unknown,
    string,
    Attachments,
  ];
  const partsById = new Map<string, MimePart>(
    attachments.parts.map((p) => [p.headers['content-id'].replace(/^<|>$/g, ''), p]),
  );
  expect(await envelopeErrors(inlineXop(rawResponse, partsById))).toEqual([]);
  return {
    applicationName: result.applicationName,
    jobId: result.jobId,
    success: result.success,
    payloads: result.payload.map((p) => ({
      name: p.attributes.name,
      contentType: p.attributes.contentType,
      data: attachmentOf(p.data, attachments),
    })),
  };
}

function payload(name: string, contentType: string, data: Buffer | string) {
  return { attributes: { name, contentType }, data: Buffer.from(data).toString('base64') };
}

function byName(payloads: ClientPayload[]): Map<string, ClientPayload> {
  return new Map(payloads.map((p) => [p.name, p]));
}

describe('SOAP Process with a client generated from the served WSDL (SPEC §7)', () => {
  let service: TestService;
  let client: Client;

  beforeAll(async () => {
    service = await startTestService();
    await loadTestCatalog(service);
    client = await generatedClient(`${service.url}${SOAP_PATH}?wsdl`);
  });
  afterAll(async () => {
    await service.stop();
  });

  it('a job sent as one ZIP payload answers its result as one ZIP payload', async () => {
    const zip = await makeZip([
      { name: 'plot.R', content: PLOT_SCRIPT },
      { name: 'data.csv', content: 'x\n1\n2\n3\n' },
    ]);
    const result = await process(client, {
      applicationName: 'demo',
      payload: [payload('job.zip', 'application/zip', zip)],
    });
    expect(result).toMatchObject({ applicationName: 'demo', success: true });
    expect(result.jobId).toMatch(/^[0-9a-f-]{36}$/);
    expect(result.payloads).toHaveLength(1);
    expect(result.payloads[0]).toMatchObject({
      name: `${result.jobId}.zip`,
      contentType: 'application/zip',
    });
    const files = await explodeZip(result.payloads[0].data, {
      maxEntries: 10,
      maxUncompressedBytes: 1e8,
      maxCompressionRatio: 1e6,
    });
    expect(files.map((f) => f.name).sort()).toEqual(['plot.pdf', 'summary.txt']);
    // The same result is readable over REST, and the job is marked as a SOAP job.
    const rest = await request(`${service.url}${REST}/results/demo/${result.jobId}`);
    expect(rest.status).toBe(200);
  });

  it('an R script and a data file as two payloads: one payload per result file', async () => {
    const result = await process(client, {
      applicationName: 'demo',
      payload: [
        payload('plot.R', 'text/plain', PLOT_SCRIPT),
        payload('data.csv', 'text/csv', 'x\n1\n2\n3\n'),
      ],
    });
    expect(result.success).toBe(true);
    const files = byName(result.payloads);
    expect([...files.keys()].sort()).toEqual(['plot.pdf', 'summary.txt']);
    expect(files.get('plot.pdf')?.contentType).toBe('application/pdf');
    expect(files.get('plot.pdf')?.data.subarray(0, 5).toString()).toBe('%PDF-');
    expect(files.get('summary.txt')?.contentType).toBe('text/plain');
    expect(files.get('summary.txt')?.data.toString()).toBe('mean\n2\n');
  });

  it('parameters are meta parameters: rScript names a catalog script, others reach configuration.txt', async () => {
    const result = await process(client, {
      applicationName: 'demo',
      parameter: [
        { attributes: { name: 'rScript', value: 'summary.R' } },
        { attributes: { name: 'Colour', value: 'blue' } },
      ],
      payload: [payload('numbers.csv', 'text/csv', 'a,b\n1,2\n3,5\n')],
    });
    expect(result.success).toBe(true);
    const files = byName(result.payloads);
    expect([...files.keys()].sort()).toEqual(['summary.pdf', 'summary.txt']);
    expect(files.get('summary.txt')?.data.toString()).toMatch(/numbers\.csv: 2 rows, 2 columns/);

    const meta = await process(client, {
      applicationName: 'demo',
      parameter: [{ attributes: { name: 'Colour', value: 'blue' } }],
      payload: [
        payload('meta.R', 'text/plain', 'writeLines(readLines("configuration.txt"), "meta.txt")'),
      ],
    });
    expect(byName(meta.payloads).get('meta.txt')?.data.toString()).toBe('Colour = blue\n');
  });

  it('one JSON payload without parameters is a function call answered as application/json', async () => {
    const result = await process(client, {
      applicationName: 'demo',
      payload: [payload('call.json', 'application/json', '{"RFunction":"combn","n":4,"k":3}')],
    });
    expect(result.success).toBe(true);
    expect(result.payloads).toHaveLength(1);
    expect(result.payloads[0]).toMatchObject({
      name: `${result.jobId}.json`,
      contentType: 'application/json',
    });
    expect(JSON.parse(result.payloads[0].data.toString())).toMatchObject({
      n: 4,
      k: 3,
      combinations: [
        [1, 2, 3],
        [1, 2, 4],
        [1, 3, 4],
        [2, 3, 4],
      ],
    });
  });

  it('one XML payload without parameters is a function call answered as application/xml', async () => {
    const result = await process(client, {
      applicationName: 'demo',
      payload: [payload('call.xml', 'application/xml', '<call RFunction="hello" name="Zoë"/>')],
    });
    expect(result.success).toBe(true);
    expect(result.payloads[0].contentType).toBe('application/xml');
    expect(result.payloads[0].data.toString('utf8')).toMatch(/Hello, Zoë!/);
  });

  it('a failing job: success=false and its error text as a text/plain payload', async () => {
    const result = await process(client, {
      applicationName: 'demo',
      payload: [payload('fail.R', 'text/plain', 'stop("the analysis failed on purpose")')],
    });
    expect(result.success).toBe(false);
    expect(result.payloads).toHaveLength(1);
    expect(result.payloads[0]).toMatchObject({
      name: `${result.jobId}.txt`,
      contentType: 'text/plain',
    });
    const text = result.payloads[0].data.toString();
    expect(text).toMatch(/the analysis failed on purpose/);
    expect(text).toContain(result.jobId);
  });

  it('a failing function call: success=false and its error document', async () => {
    const result = await process(client, {
      applicationName: 'demo',
      payload: [payload('call.json', 'application/json', '{"RFunction":"fail"}')],
    });
    expect(result.success).toBe(false);
    expect(result.payloads[0].contentType).toBe('application/json');
    expect(JSON.parse(result.payloads[0].data.toString())).toMatchObject({
      jobId: result.jobId,
      applicationName: 'demo',
      errorMessage: expect.stringMatching(/this function always fails/),
    });
  });

  it('a bad application name is a soap:Client fault', async () => {
    await expect(
      processMethod(client)({
        applicationName: 'no such app!',
        payload: [payload('call.json', 'application/json', '{}')],
      }),
    ).rejects.toMatchObject({
      root: {
        Envelope: {
          Body: {
            Fault: {
              faultcode: 'soap:Client',
              faultstring: expect.stringMatching(/applicationName.*"no such app!" is invalid/),
            },
          },
        },
      },
    });
  });

  it('sends MTOM itself when asked (forceMTOM with attachments), with binary data intact', async () => {
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const include = (cid: string) => ({
      $xml: `<xop:Include xmlns:xop="${XOP_NS}" href="cid:${cid}"/>`,
    });
    const result = await process(
      client,
      {
        applicationName: 'demo',
        payload: [
          {
            attributes: { name: 'copy.R', contentType: 'text/plain' },
            data: include('script@client'),
          },
          {
            attributes: { name: 'blob.bin', contentType: 'application/octet-stream' },
            data: include('blob@client'),
          },
        ],
      },
      {
        forceMTOM: true,
        attachments: [
          {
            mimetype: 'text/plain',
            contentId: 'script@client',
            name: 'copy.R',
            body: Buffer.from('invisible(file.copy("blob.bin", "copy.bin"))'),
          },
          {
            mimetype: 'application/octet-stream',
            contentId: 'blob@client',
            name: 'blob.bin',
            body: bytes,
          },
        ],
      },
    );
    expect(client.lastRequestHeaders).toMatchObject({
      'Content-Type': expect.stringMatching(/^multipart\/related; type="application\/xop\+xml"/),
    });
    expect(result.success).toBe(true);
    const copy = byName(result.payloads).get('copy.bin');
    expect(copy?.contentType).toBe('application/octet-stream');
    expect(copy?.data.equals(bytes)).toBe(true);
  });
});
