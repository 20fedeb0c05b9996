/**
 * SOAP requests and faults written by hand: the envelope and MTOM edges.
 *
 * @ci-pass node24
 */
import { hashSecret } from '../../src/common/secret-hash';
import { loadTestCatalog } from '../support/function-calls';
import { parseMetrics, sample } from '../support/prometheus';
import { REST, request, waitForResult } from '../support/rest-client';
import {
  ENVELOPE_NS,
  faultAnswer,
  generatedClient,
  jobEnvelope,
  mtomJobRequest,
  postSoap,
  processAnswer,
  processMethod,
  TYPES_NS,
} from '../support/soap-client';
import { startTestService, storedJobRows, TestService } from '../support/test-service';
import { makeZip } from '../support/zip-fixtures';

const JSON_CALL = {
  name: 'call.json',
  contentType: 'application/json',
  data: '{"RFunction":"hello","name":"raw"}',
};

/** Expects a SOAP 1.1 fault answer: HTTP 500, text/xml, a valid envelope; returns its string. */
async function expectFault(
  answer: Awaited<ReturnType<typeof postSoap>>,
  code: 'Client' | 'Server' | 'VersionMismatch',
  status = 500,
): Promise<string> {
  expect({ status: answer.status, type: answer.headers.get('content-type') }).toEqual({
    status,
    type: 'text/xml; charset=utf-8',
  });
  const fault = await faultAnswer(answer);
  expect(fault.errors).toEqual([]);
  expect(fault.faultcode).toBe(`soap:${code}`);
  return fault.faultstring;
}

describe('SOAP Process over raw HTTP (SPEC §7)', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService();
    await loadTestCatalog(service);
  });
  afterAll(async () => {
    await service.stop();
  });

  it('an MTOM request with XOP references: binary data arrives intact; the answer is MTOM', async () => {
    const bytes = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7) % 256));
    const mtom = mtomJobRequest('demo', [
      {
        name: 'copy.R',
        contentType: 'text/plain',
        data: 'invisible(file.copy("blob.bin", "copy.bin"))',
      },
      { name: 'blob.bin', contentType: 'application/octet-stream', data: bytes },
    ]);
    const answer = await postSoap(service.url, mtom.body, mtom.contentType);
    expect(answer.headers.get('content-type')).toMatch(
      /^multipart\/related;.*type="application\/xop\+xml"/,
    );
    const { result, errors, root } = await processAnswer(answer);
    expect(errors).toEqual([]);
    expect(root.headers['content-type']).toMatch(/^application\/xop\+xml/);
    expect(result.success).toBe(true);
    expect(result.payloads).toHaveLength(1);
    expect(result.payloads[0]).toMatchObject({
      name: 'copy.bin',
      contentType: 'application/octet-stream',
    });
    expect(result.payloads[0].data.equals(bytes)).toBe(true);
  });

  it('a plain request with inline base64, with and without SOAPAction', async () => {
    for (const action of [undefined, '""', '"urn:svc:soap:Process"']) {
      const answer = await postSoap(
        service.url,
        jobEnvelope('demo', [JSON_CALL]),
        undefined,
        action,
      );
      const { result, errors } = await processAnswer(answer);
      expect(errors).toEqual([]);
      expect(result.success).toBe(true);
      expect(JSON.parse(result.payloads[0].data.toString())).toMatchObject({
        greeting: 'Hello, raw!',
      });
    }
  });

  it('a malformed envelope is a soap:Client fault', async () => {
    const answer = await postSoap(
      service.url,
      `<soapenv:Envelope xmlns:soapenv="${ENVELOPE_NS}"><soapenv:Body><job>`,
    );
    expect(await expectFault(answer, 'Client')).not.toBe('');
  });

  it('a wrong Content-Type is a soap:Client fault', async () => {
    const answer = await postSoap(
      service.url,
      jobEnvelope('demo', [JSON_CALL]),
      'application/json',
    );
    expect(await expectFault(answer, 'Client')).toMatch(/application\/json/);
  });

  it('a SOAP 1.2 envelope is a VersionMismatch fault', async () => {
    const soap12 =
      '<env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope"><env:Body>' +
      `<job xmlns="${TYPES_NS}"/></env:Body></env:Envelope>`;
    await expectFault(
      await postSoap(service.url, soap12, 'application/soap+xml; charset=utf-8'),
      'VersionMismatch',
    );
    await expectFault(await postSoap(service.url, soap12), 'VersionMismatch');
  });

  it('an unknown operation, or a SOAPAction naming one, is a soap:Client fault', async () => {
    const cancel = `<s:Envelope xmlns:s="${ENVELOPE_NS}"><s:Body><t:cancel xmlns:t="${TYPES_NS}"/></s:Body></s:Envelope>`;
    expect(await expectFault(await postSoap(service.url, cancel), 'Client')).toMatch(
      /Unknown operation.*cancel.*Process/,
    );
    const wrongAction = await postSoap(
      service.url,
      jobEnvelope('demo', [JSON_CALL]),
      undefined,
      '"urn:svc:soap:Cancel"',
    );
    expect(await expectFault(wrongAction, 'Client')).toMatch(/SOAPAction "urn:svc:soap:Cancel"/);
  });

  it('job validation errors are soap:Client faults with the REST message', async () => {
    const noPayload = jobEnvelope('demo', []);
    expect(await expectFault(await postSoap(service.url, noPayload), 'Client')).toMatch(/payload/);

    const nested = await makeZip([{ name: 'dir/a.R', content: 'x <- 1' }]);
    const nestedZip = jobEnvelope('demo', [
      { name: 'job.zip', contentType: 'application/zip', data: nested },
    ]);
    expect(await expectFault(await postSoap(service.url, nestedZip), 'Client')).toMatch(
      /in the payload "job\.zip": .*nested directories are not supported/,
    );

    const twoScripts = jobEnvelope('demo', [
      { name: 'a.R', contentType: 'text/plain', data: 'x <- 1' },
      { name: 'b.r', contentType: 'text/plain', data: 'x <- 2' },
    ]);
    expect(await expectFault(await postSoap(service.url, twoScripts), 'Client')).toMatch(
      /at most one R script/,
    );

    const badName = jobEnvelope('demo', [{ name: '../a.R', contentType: 'text/plain', data: 'x' }]);
    expect(await expectFault(await postSoap(service.url, badName), 'Client')).toMatch(
      /path separator/,
    );

    const twice = jobEnvelope(
      'demo',
      [{ name: 'a.R', contentType: 'text/plain', data: 'x' }],
      [
        { name: 'rScript', value: 'a.R' },
        { name: 'RSCRIPT', value: 'b.R' },
      ],
    );
    expect(await expectFault(await postSoap(service.url, twice), 'Client')).toMatch(
      /"rScript" is given more than once/,
    );

    const notUtf8 = jobEnvelope('demo', [
      { name: 'c.json', contentType: 'application/json', data: Buffer.from([0xff, 0xfe]) },
    ]);
    expect(await expectFault(await postSoap(service.url, notUtf8), 'Client')).toMatch(/not UTF-8/);
  });

  it('counts SOAP jobs under source="soap" in the metrics', async () => {
    const metrics = parseMetrics((await request(`${service.url}/metrics`)).text);
    const soap = sample(metrics, 'svc_jobs_submitted_total', {
      application: 'demo',
      source: 'soap',
    });
    expect(Number(soap?.value)).toBeGreaterThan(0);
  });
});

describe('SOAP Process time limit (SOAP_TIMEOUT_SECONDS)', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService({ SOAP_TIMEOUT_SECONDS: '1' });
  });
  afterAll(async () => {
    await service.stop();
  });

  it('a job that outlasts it: soap:Server fault naming the job, whose result REST serves later', async () => {
    const slow = jobEnvelope('demo', [
      {
        name: 'slow.R',
        contentType: 'text/plain',
        data: 'Sys.sleep(3); writeLines("done", "done.txt")',
      },
    ]);
    const message = await expectFault(await postSoap(service.url, slow), 'Server');
    const jobId = /Job ([0-9a-f-]{36})/.exec(message)?.[1];
    expect(jobId).toBeDefined();
    const resultUri = `${service.url}${REST}/results/demo/${jobId}`;
    // The fault came while the job still ran: its result did not exist yet (404), it does later.
    expect((await request(resultUri)).status).toBe(404);
    expect(message).toContain(resultUri);
    expect(message).toMatch(/SOAP_TIMEOUT_SECONDS/);
    const ready = await waitForResult(resultUri);
    expect(ready.text).toMatch(/success="true"/);
  });
});

describe('SOAP Process access control (AUTH_MODE=basic)', () => {
  let service: TestService;
  const cheap = { N: 1024, r: 8, p: 1 };
  const basic = (user: string, password: string) =>
    `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

  beforeAll(async () => {
    service = await startTestService({
      AUTH_MODE: 'basic',
      USERS: JSON.stringify({
        ana: { passwordHash: await hashSecret('ana-secret', cheap), roles: [] },
      }),
      APPLICATION_SECURITY: JSON.stringify({
        demo: {
          userPrincipals: ['ana'],
          functionCallAllowed: true,
          scriptSubmissionAllowed: false,
        },
      }),
    });
    await loadTestCatalog(service);
  });
  afterAll(async () => {
    await service.stop();
  });

  it('no credentials: HTTP 401 with the Basic challenge and a soap:Client fault body', async () => {
    const answer = await postSoap(service.url, jobEnvelope('demo', [JSON_CALL]));
    expect(answer.headers.get('www-authenticate')).toMatch(/^Basic realm="svc"/);
    expect(await expectFault(answer, 'Client', 401)).toMatch(/Authentication required/);
    const wrong = await postSoap(
      service.url,
      jobEnvelope('demo', [JSON_CALL]),
      undefined,
      undefined,
      {
        Authorization: basic('ana', 'wrong'),
      },
    );
    expect(await expectFault(wrong, 'Client', 401)).toMatch(/not valid/);
  });

  it('with credentials: the function call runs; a script job the application forbids is a Client fault', async () => {
    const headers = { Authorization: basic('ana', 'ana-secret') };
    const call = await postSoap(
      service.url,
      jobEnvelope('demo', [JSON_CALL]),
      undefined,
      undefined,
      headers,
    );
    expect((await processAnswer(call)).result.success).toBe(true);
    const script = jobEnvelope('demo', [
      { name: 'a.R', contentType: 'text/plain', data: 'x <- 1' },
    ]);
    const before = await storedJobRows(service);
    const denied = await postSoap(service.url, script, undefined, undefined, headers);
    expect(await expectFault(denied, 'Client')).toMatch(/script/i);
    // Refused before anything of it is kept: no job, no file, no byte of its payload.
    expect(await storedJobRows(service)).toEqual(before);
  });

  it('a generated client with nestjs-soap basic auth sends the credentials and gets its result', async () => {
    const wsdlUrl = `${service.url}/svc/api/soap/mtom-jobs?wsdl`;
    const call = {
      applicationName: 'demo',
      payload: [
        {
          attributes: { name: 'call.json', contentType: 'application/json' },
          data: Buffer.from('{"RFunction":"hello","name":"ana"}').toString('base64'),
        },
      ],
    };
    const client = await generatedClient(wsdlUrl, {}, { username: 'ana', password: 'ana-secret' });
    const [result] = (await processMethod(client)(call)) as [{ success: boolean }];
    expect(result.success).toBe(true);
    const anonymous = await generatedClient(wsdlUrl);
    await expect(processMethod(anonymous)(call)).rejects.toMatchObject({
      response: { status: 401 },
    });
  });

  it('the WSDL and schemas stay public', async () => {
    expect((await request(`${service.url}/svc/api/soap/mtom-jobs?wsdl`)).status).toBe(200);
    expect((await request(`${service.url}/svc/wsdl/soap-data.xsd`)).status).toBe(200);
  });
});
