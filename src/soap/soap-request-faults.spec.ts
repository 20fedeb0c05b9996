import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { SoapFault, type SoapFaultCode } from './soap-fault';
import {
  envelope,
  include,
  job,
  listFiles,
  mtomBody,
  mtomHeaders,
  ROOT_TYPE,
  serveSoapReader,
  SOAP11,
  SOAP12,
  TEXT_XML,
  waitFor,
} from '../../test/support/soap-request-harness';

/** readSoapRequest refusing what it cannot read (SOAP faults), and connections that go away. */
const reader = serveSoapReader();
const { readFault } = reader;

describe('readSoapRequest faults', () => {
  const validJob = job({
    applicationName: 'a',
    payloads: [{ name: 'p', contentType: 'text/plain', data: 'aGk=' }],
  });
  const cases: Array<[string, Record<string, string>, string | Buffer, SoapFaultCode, RegExp]> = [
    ['no Content-Type', {}, envelope(validJob), 'Client', /no Content-Type/],
    ['a JSON Content-Type', { 'content-type': 'application/json' }, '{}', 'Client', /not accepted/],
    [
      'SOAP 1.2 media type',
      { 'content-type': 'application/soap+xml' },
      envelope(validJob, SOAP12),
      'VersionMismatch',
      /SOAP 1\.2/,
    ],
    ['a SOAP 1.2 envelope', TEXT_XML, envelope(validJob, SOAP12), 'VersionMismatch', /SOAP 1\.2/],
    [
      'multipart/related that is not XOP',
      { 'content-type': 'multipart/related; boundary=x; type="text/xml"' },
      '--x--',
      'Client',
      /application\/xop\+xml/,
    ],
    [
      'multipart/related without boundary',
      { 'content-type': 'multipart/related; type="application/xop+xml"' },
      '--x--',
      'Client',
      /no boundary/,
    ],
    [
      'a Latin-1 charset',
      { 'content-type': 'text/xml; charset=iso-8859-1' },
      envelope(validJob),
      'Client',
      /charset/,
    ],
    [
      'malformed XML',
      TEXT_XML,
      '<soap:Envelope xmlns:soap="' + SOAP11 + '"><soap:Body></soap:Envelope>',
      'Client',
      /malformed XML/,
    ],
    ['an unbound prefix', TEXT_XML, envelope('<x:job/>'), 'Client', /malformed XML/],
    ['an empty body of the request', TEXT_XML, '', 'Client', /no soap:Envelope/],
    [
      'a root element that is not Envelope',
      TEXT_XML,
      `<soap:Body xmlns:soap="${SOAP11}"/>`,
      'Client',
      /not a soap:Envelope/,
    ],
    [
      'no soap:Body',
      TEXT_XML,
      `<soap:Envelope xmlns:soap="${SOAP11}"><soap:Header/></soap:Envelope>`,
      'Client',
      /no soap:Body/,
    ],
    ['an empty soap:Body', TEXT_XML, envelope('  '), 'Client', /soap:Body is empty/],
    [
      'two operation elements',
      TEXT_XML,
      envelope(validJob + validJob),
      'Client',
      /more than one element/,
    ],
    [
      'a DTD',
      TEXT_XML,
      `<!DOCTYPE x [<!ENTITY e "x">]>${envelope(validJob)}`,
      'Client',
      /document type declaration/,
    ],
    [
      'no applicationName',
      TEXT_XML,
      envelope(job({ payloads: [{ name: 'p', contentType: 't/p', data: '' }] })),
      'Client',
      /no applicationName/,
    ],
    [
      'two applicationNames',
      TEXT_XML,
      envelope(
        validJob.replace(
          '<t:applicationName>a</t:applicationName>',
          '<t:applicationName>a</t:applicationName><t:applicationName>b</t:applicationName>',
        ),
      ),
      'Client',
      /more than one applicationName/,
    ],
    [
      'no payload',
      TEXT_XML,
      envelope(job({ applicationName: 'a', payloads: [] })),
      'Client',
      /no payload/,
    ],
    [
      'a payload without name',
      TEXT_XML,
      envelope(validJob.replace(' name="p"', '')),
      'Client',
      /name and a contentType/,
    ],
    [
      'a payload without contentType',
      TEXT_XML,
      envelope(validJob.replace(' contentType="text/plain"', '')),
      'Client',
      /name and a contentType/,
    ],
    [
      'a payload without data',
      TEXT_XML,
      envelope(validJob.replace('<t:data>aGk=</t:data>', '')),
      'Client',
      /no data element/,
    ],
    [
      'a parameter without value',
      TEXT_XML,
      envelope(
        job({ applicationName: 'a', payloads: [] }).replace(
          '</t:applicationName>',
          '</t:applicationName><t:parameter name="x"/>',
        ),
      ),
      'Client',
      /name and a value/,
    ],
    [
      'a parameter value over 64 KiB',
      TEXT_XML,
      envelope(
        job({
          applicationName: 'a',
          parameters: [['long', 'v'.repeat(64 * 1024 + 1)]],
          payloads: [],
        }),
      ),
      'Client',
      /longer than 65536 characters/,
    ],
    [
      'an unknown element in the job',
      TEXT_XML,
      envelope(validJob.replace('<t:payload', '<t:extra/><t:payload')),
      'Client',
      /unexpected element/,
    ],
    [
      'base64 with a bad character',
      TEXT_XML,
      envelope(validJob.replace('aGk=', 'aG*k')),
      'Client',
      /base64/,
    ],
    [
      'base64 with a bad length',
      TEXT_XML,
      envelope(validJob.replace('aGk=', 'aGk')),
      'Client',
      /multiple of 4/,
    ],
    [
      'base64 with misplaced padding',
      TEXT_XML,
      envelope(validJob.replace('aGk=', 'aG==aGk=')),
      'Client',
      /padding/,
    ],
    [
      'an xop:Include in a plain request',
      TEXT_XML,
      envelope(validJob.replace('aGk=', include('cid:x'))),
      'Client',
      /not a part of the request/,
    ],
    [
      'an xop:Include without cid: href',
      TEXT_XML,
      envelope(validJob.replace('aGk=', include('http://x'))),
      'Client',
      /valid cid/,
    ],
    [
      'an xop:Include mixed with base64',
      TEXT_XML,
      envelope(validJob.replace('aGk=', `aGk=${include('cid:x')}`)),
      'Client',
      /mixes xop:Include/,
    ],
  ];

  it.each(cases)('answers %s with a fault', async (_name, headers, body, code, message) => {
    const { fault, answer } = await readFault(headers, body);
    expect(fault.code).toBe(code);
    expect(fault.message).toMatch(message);
    expect(answer.status).toBe(500);
    expect(answer.body).toContain(`<faultcode>soap:${code}</faultcode>`);
  });

  it('answers a temp directory that cannot be made with a Server fault', async () => {
    reader.limits.tempDir = join(reader.tempDir, 'missing', 'deeper');
    const { fault } = await readFault(TEXT_XML, envelope(validJob));
    expect(fault.code).toBe('Server');
    expect(fault.message).toMatch(/could not be stored/);
  });

  it('faults on more payloads or parameters than the limits allow', async () => {
    reader.limits.maxPayloads = 2;
    reader.limits.maxParameters = 1;
    const payload = { name: 'p', contentType: 't/p', data: 'aGk=' };
    const tooManyPayloads = await readFault(
      TEXT_XML,
      envelope(job({ applicationName: 'a', payloads: [payload, payload, payload] })),
    );
    expect(tooManyPayloads.fault.message).toMatch(/more than 2 payloads/);
    const tooManyParameters = await readFault(
      TEXT_XML,
      envelope(
        job({
          applicationName: 'a',
          parameters: [
            ['a', '1'],
            ['b', '2'],
          ],
          payloads: [payload],
        }),
      ),
    );
    expect(tooManyParameters.fault.message).toMatch(/more than 1 parameters/);
  });

  it('faults on a request over maxRequestBytes, declared or counted while streaming', async () => {
    reader.limits.maxRequestBytes = 64 * 1024;
    const big = envelope(
      job({
        applicationName: 'a',
        payloads: [{ name: 'p', contentType: 't/p', data: randomBytes(100000).toString('base64') }],
      }),
    );
    const declared = await readFault(TEXT_XML, big);
    expect(declared.fault.message).toMatch(/larger than 65536 bytes/);
    // Chunked: no Content-Length to look at, so the limit trips while reading.
    const streamed = await readFault(TEXT_XML, Readable.from([Buffer.from(big)]));
    expect(streamed.fault.message).toMatch(/larger than 65536 bytes/);
  });

  it('faults on a truncated multipart body, a body without the boundary, and a missing part', async () => {
    const boundary = 'bnd';
    const root = {
      headers: { 'Content-Type': ROOT_TYPE },
      body: envelope(
        job({
          applicationName: 'a',
          payloads: [{ name: 'p', contentType: 'x/y', data: include('cid:p') }],
        }),
      ),
    };
    const complete = mtomBody(boundary, [
      root,
      { headers: { 'Content-ID': '<p>' }, body: randomBytes(2000) },
    ]);
    const truncated = await readFault(
      mtomHeaders(boundary),
      complete.subarray(0, complete.length - 600),
    );
    expect(truncated.fault.message).toMatch(/truncated/);
    const noBoundary = await readFault(mtomHeaders('other'), complete);
    expect(noBoundary.fault.message).toMatch(/no boundary delimiter/);
    const missing = await readFault(mtomHeaders(boundary), mtomBody(boundary, [root]));
    expect(missing.fault.message).toMatch(/refers to cid:p, which is not a part/);
    const noRoot = await readFault(mtomHeaders(boundary, '<nowhere>'), complete);
    expect(noRoot.fault.message).toMatch(/no root part/);
    const duplicate = await readFault(
      mtomHeaders(boundary),
      mtomBody(boundary, [
        root,
        { headers: { 'Content-ID': '<p>' }, body: 'a' },
        { headers: { 'Content-ID': '<p>' }, body: 'b' },
      ]),
    );
    expect(duplicate.fault.message).toMatch(/two MIME parts/);
    const soap12Root = await readFault(
      mtomHeaders(boundary),
      mtomBody(boundary, [
        {
          headers: {
            'Content-Type': 'application/xop+xml; charset=UTF-8; type="application/soap+xml"',
          },
          body: root.body,
        },
      ]),
    );
    expect(soap12Root.fault.code).toBe('VersionMismatch');
  });

  it('removes the temp files of a client that disconnects mid-upload, without an unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => {
      unhandled.push(reason);
    };
    process.on('unhandledRejection', onUnhandled);
    try {
      const boundary = 'gone';
      const head = Buffer.from(
        `--${boundary}\r\nContent-Type: ${ROOT_TYPE}\r\n\r\n${envelope(job({ applicationName: 'a', payloads: [{ name: 'p', contentType: 'x/y', data: include('cid:p') }] }))}` +
          `\r\n--${boundary}\r\nContent-ID: <p>\r\n\r\n`,
      );
      const req = request(`${reader.baseUrl}/soap`, {
        method: 'POST',
        headers: mtomHeaders(boundary),
      });
      req.on('error', () => undefined);
      req.write(head);
      req.write(randomBytes(512 * 1024));
      // Wait until the server has spooled some of the attachment, then drop the connection.
      await waitFor(async () =>
        (await listFiles(reader.tempDir)).some((file) => file.startsWith('attachment')),
      );
      req.destroy();
      const outcome = await reader.outcomes[reader.outcomes.length - 1];
      expect('fault' in outcome && outcome.fault instanceof SoapFault).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});

describe('readSoapRequest and connections', () => {
  it('faults on a connection that closed before reading started', async () => {
    let openGate = (): void => undefined;
    reader.readGate = new Promise((resolve) => (openGate = resolve));
    const req = request(`${reader.baseUrl}/soap`, { method: 'POST', headers: TEXT_XML });
    req.on('error', () => undefined);
    req.write('<soap:Envelope');
    await waitFor(() => Promise.resolve(reader.outcomes.length === 1));
    req.destroy();
    await new Promise((resolve) => setTimeout(resolve, 50));
    openGate();
    const outcome = await reader.outcomes[0];
    expect('fault' in outcome && (outcome.fault as SoapFault).message).toMatch(
      /closed the connection/,
    );
  });
});
