import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { XMLParser } from 'fast-xml-parser';
import { request } from '../support/rest-client';
import { generatedClient, SOAP_PATH } from '../support/soap-client';
import { spawnService } from '../support/service-process';
import {
  createTestDatabase,
  startTestService,
  testEnvironment,
  TestService,
} from '../support/test-service';
import { validateAgainstSchema } from '../support/xml-schema';

const WSDL_DIR = resolve(__dirname, '../../wsdl');
const WSDL_FILE = readFileSync(join(WSDL_DIR, 'svc-jobs.wsdl'));
const FILE_ADDRESS = 'location="http://localhost:8888/svc/api/soap/mtom-jobs"';
const FILE_SCHEMA_LOCATION = 'schemaLocation="soap-data.xsd"';

/** The served WSDL with the two served URLs put back as the file has them. */
function asInFile(served: string, base: string): string {
  return served
    .replace(`location="${base}${SOAP_PATH}"`, FILE_ADDRESS)
    .replace(`schemaLocation="${base}/svc/wsdl/soap-data.xsd"`, FILE_SCHEMA_LOCATION);
}

describe('the published WSDL and schemas (SPEC §7)', () => {
  let service: TestService;

  beforeAll(async () => {
    // The tests' loopback stands for a proxy whose forwarded headers count.
    service = await startTestService({ TRUST_PROXY: 'loopback' });
  });
  afterAll(async () => {
    await service.stop();
  });

  it('GET ?wsdl: the file of wsdl/, byte for byte, but for the endpoint address and schema URL', async () => {
    const answer = await request(`${service.url}${SOAP_PATH}?wsdl`);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toBe('text/xml; charset=utf-8');
    expect(answer.text).toContain(`<soap:address location="${service.url}${SOAP_PATH}"/>`);
    expect(answer.text).toContain(`schemaLocation="${service.url}/svc/wsdl/soap-data.xsd"`);
    expect(Buffer.from(asInFile(answer.text, service.url)).equals(WSDL_FILE)).toBe(true);
    // ?WSDL as some tools write it.
    expect((await request(`${service.url}${SOAP_PATH}?WSDL`)).text).toBe(answer.text);
  });

  it("builds the address from a trusted proxy's forwarded headers like the REST URIs", async () => {
    const answer = await request(`${service.url}${SOAP_PATH}?wsdl`, {
      headers: { 'X-Forwarded-Proto': 'https', 'X-Forwarded-Host': 'svc.example.org' },
    });
    expect(answer.text).toContain(
      '<soap:address location="https://svc.example.org/svc/api/soap/mtom-jobs"/>',
    );
    expect(Buffer.from(asInFile(answer.text, 'https://svc.example.org')).equals(WSDL_FILE)).toBe(
      true,
    );
  });

  it('serves every file of wsdl/ at /svc/wsdl/<file>; unknown files are 404', async () => {
    const files = readdirSync(WSDL_DIR);
    expect(files).toEqual(
      expect.arrayContaining(['svc-jobs.wsdl', 'soap-data.xsd', 'xmime.xsd', 'rest-data.xsd']),
    );
    for (const file of files) {
      const answer = await request(`${service.url}/svc/wsdl/${file}`);
      expect(answer.status).toBe(200);
      expect(answer.headers.get('content-type')).toBe('text/xml; charset=utf-8');
      const expected = readFileSync(join(WSDL_DIR, file));
      const served = file.endsWith('.wsdl')
        ? Buffer.from(asInFile(answer.text, service.url))
        : answer.body;
      expect(served.equals(expected)).toBe(true);
    }
    const missing = await request(`${service.url}/svc/wsdl/nothing.xsd`);
    expect(missing.status).toBe(404);
    const put = await request(`${service.url}/svc/wsdl/soap-data.xsd`, { method: 'PUT' });
    expect(put.status).toBe(405);
  });

  it('the schemas compile and accept a job and a result', async () => {
    const job =
      '<job xmlns="urn:svc:soap:types"><applicationName>demo</applicationName>' +
      '<parameter name="rScript" value="summary.R"/>' +
      '<payload name="a.csv" contentType="text/csv"><data>eD0x</data></payload></job>';
    expect((await validateAgainstSchema(job, 'soap-data.xsd')).errors).toEqual([]);
    const result =
      '<result xmlns="urn:svc:soap:types"><applicationName>demo</applicationName>' +
      '<jobId>0b6f3a39-5d0c-4a4e-9f55-1d6b0e8f7a11</jobId><success>true</success>' +
      '<payload name="r.txt" contentType="text/plain"><data>eD0x</data></payload></result>';
    expect((await validateAgainstSchema(result, 'soap-data.xsd')).errors).toEqual([]);
    const noPayload =
      '<job xmlns="urn:svc:soap:types"><applicationName>demo</applicationName></job>';
    expect((await validateAgainstSchema(noPayload, 'soap-data.xsd')).valid).toBe(false);
    // xmime.xsd is a schema of its own too.
    expect((await validateAgainstSchema('<x/>', 'xmime.xsd')).errors.join()).toMatch(
      /global declaration/,
    );
  });

  it('meets the WS-I Basic Profile 1.1 rules that apply to a document/literal WSDL', () => {
    const wsdl = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: '' }).parse(
      WSDL_FILE.toString(),
    )['wsdl:definitions'];
    const asList = <T>(value: T | T[]): T[] => (Array.isArray(value) ? value : [value]);
    // R2204/R2201: document-literal messages have at most one part, referring by element=.
    for (const message of asList(wsdl['wsdl:message'])) {
      const parts = asList(message['wsdl:part']);
      expect(parts).toHaveLength(1);
      expect(parts[0].element).toMatch(/^types:/);
      expect(parts[0].type).toBeUndefined();
    }
    const binding = wsdl['wsdl:binding'];
    // R2701/R2702: soap:binding with the SOAP/HTTP transport; R2705: document style.
    expect(binding['soap:binding']).toEqual({
      style: 'document',
      transport: 'http://schemas.xmlsoap.org/soap/http',
    });
    for (const operation of asList(binding['wsdl:operation'])) {
      expect(operation['soap:operation'].soapAction).toBe('urn:svc:soap:Process');
      expect(operation['soap:operation'].style).toBe('document');
      // R2706: use="literal".
      expect(operation['wsdl:input']['soap:body'].use).toBe('literal');
      expect(operation['wsdl:output']['soap:body'].use).toBe('literal');
    }
    // R2003: xs:import only inside xs:schema in wsdl:types; no wsdl:import of schemas.
    expect(wsdl['wsdl:import']).toBeUndefined();
    expect(wsdl['wsdl:types']['xs:schema']['xs:import'].namespace).toBe('urn:svc:soap:types');
  });

  it('a generated client (node-soap via nestjs-soap) reads the served WSDL and its schemas', async () => {
    const client = await generatedClient(`${service.url}${SOAP_PATH}?wsdl`);
    const description = client.describe() as Record<
      string,
      Record<string, Record<string, unknown>>
    >;
    const process = description.SvcJobsService.SvcJobsSoapPort.Process as {
      input: Record<string, unknown>;
    };
    expect(Object.keys(process.input)).toEqual(
      expect.arrayContaining(['applicationName', 'parameter[]', 'payload[]']),
    );
  });

  it('GET without ?wsdl is 400 and other methods 405 with Allow: plain text, not a page', async () => {
    const get = await request(`${service.url}${SOAP_PATH}`);
    expect(get.status).toBe(400);
    expect(get.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(get.text).toMatch(/\?wsdl/);
    const put = await request(`${service.url}${SOAP_PATH}`, { method: 'PUT', body: 'x' });
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('GET, POST');
    expect(put.headers.get('content-type')).toMatch(/^text\/plain/);
  });
});

describe('the built service (npm start)', () => {
  it('prints the WSDL address at start-up and serves wsdl/ from the built code', async () => {
    const database = await createTestDatabase();
    try {
      const node = await spawnService({ ...testEnvironment(database), ROLE: 'api' });
      try {
        const port = new URL(node.url).port;
        expect(node.output()).toContain(
          `SOAP WSDL: http://localhost:${port}/svc/api/soap/mtom-jobs?wsdl`,
        );
        const wsdl = await request(`${node.url}${SOAP_PATH}?wsdl`);
        expect(Buffer.from(asInFile(wsdl.text, node.url)).equals(WSDL_FILE)).toBe(true);
        expect((await request(`${node.url}/svc/wsdl/soap-data.xsd`)).status).toBe(200);
      } finally {
        node.child.kill('SIGTERM');
        expect(await node.exited()).toBe(0);
      }
    } finally {
      await database.drop();
    }
  });
});
