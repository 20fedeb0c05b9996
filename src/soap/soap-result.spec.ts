import { Readable } from 'node:stream';
import * as yazl from 'yazl';
import { AnswerPayload, answerPayloads, resultEnvelope, StoredResult } from './soap-result';

async function zipOf(files: Record<string, string>): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  for (const [name, content] of Object.entries(files)) {
    zip.addBuffer(Buffer.from(content), name);
  }
  zip.end();
  const chunks: Buffer[] = [];
  for await (const chunk of zip.outputStream as AsyncIterable<Buffer>) {
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

async function read(stream: Readable | Promise<Readable>): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of await stream) {
    chunks.push(Buffer.from(chunk as Buffer));
  }
  return Buffer.concat(chunks).toString();
}

function stored(type: string, contentType: string, data: Buffer, success = true): StoredResult {
  return {
    applicationName: 'demo',
    jobId: 'j-1',
    success,
    type,
    contentType,
    open: () => Readable.from([data]),
  };
}

/** The payloads of the answer; what they hold on disk is released after the test. */
const disposers: Array<() => Promise<void>> = [];
async function payloadsOf(result: StoredResult, singleZip: boolean): Promise<AnswerPayload[]> {
  const answer = await answerPayloads(result, singleZip);
  disposers.push(() => answer.dispose());
  return answer.payloads;
}

afterEach(async () => {
  await Promise.all(disposers.splice(0).map((dispose) => dispose()));
});

describe('answerPayloads (SPEC §7)', () => {
  it('a multi-file job: one payload per result file, typed by extension', async () => {
    const zip = await zipOf({ 'a.csv': 'x\n1\n', 'plot.pdf': '%PDF-', 'notes.unknownext': '?' });
    const payloads = await payloadsOf(stored('zip', 'application/zip', zip), false);
    expect(payloads.map((p) => [p.name, p.contentType])).toEqual([
      ['a.csv', 'text/csv'],
      ['plot.pdf', 'application/pdf'],
      ['notes.unknownext', 'application/octet-stream'],
    ]);
    expect(await read(payloads[0].attachment.open())).toBe('x\n1\n');
    expect(new Set(payloads.map((p) => p.attachment.contentId)).size).toBe(3);
  });

  it('a job sent as one ZIP: the result ZIP as it is', async () => {
    const zip = await zipOf({ 'a.txt': 'a' });
    const payloads = await payloadsOf(stored('zip', 'application/zip', zip), true);
    expect(payloads.map((p) => [p.name, p.contentType])).toEqual([['j-1.zip', 'application/zip']]);
  });

  it('a job that wrote no file still answers one payload: its empty ZIP', async () => {
    const payloads = await payloadsOf(stored('zip', 'application/zip', await zipOf({})), false);
    expect(payloads.map((p) => p.name)).toEqual(['j-1.zip']);
  });

  it('an error text: text/plain without parameters in the attribute, with charset on the part', async () => {
    const payloads = await payloadsOf(
      stored('txt', 'text/plain; charset=utf-8', Buffer.from('boom'), false),
      false,
    );
    expect(payloads[0]).toMatchObject({ name: 'j-1.txt', contentType: 'text/plain' });
    expect(payloads[0].attachment.contentType).toBe('text/plain; charset=utf-8');
  });
});

describe('resultEnvelope', () => {
  it('escapes names and replaces characters XML cannot carry', async () => {
    const zip = await zipOf({ 'a&b<"c>.txt': 'x', 'bell\u0007.txt': 'y' });
    const result = stored('zip', 'application/zip', zip);
    const envelope = resultEnvelope(result, await payloadsOf(result, false));
    expect(envelope).toContain('name="a&amp;b&lt;&quot;c&gt;.txt"');
    expect(envelope).toContain('name="bell\uFFFD.txt"');
    expect(envelope).toContain('<success>true</success>');
  });
});
