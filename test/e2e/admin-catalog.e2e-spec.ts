import { request as httpRequest } from 'node:http';
import { createTestDatabase, TestDatabase, TestService } from '../support/test-service';
import { sharedServices } from '../support/shared-services';
import { ADMIN_AUTHORIZATION, ADMIN_ENV, TEST_ADMIN_PASSWORD } from '../support/admin-auth';
import { Answer, parseXml, postZip, request, REST, waitForResult } from '../support/rest-client';
import { validateAgainstSchema } from '../support/xml-schema';
import { makeZip } from '../support/zip-fixtures';

const XML = 'application/vnd.svc+xml';
const JSON_TYPE = 'application/vnd.svc+json';
const MAX_FILE_BYTES = 1024;
const DB_PASSWORD = 'db-secret-for-masking';

// One service for both describes: the catalog's file limit, and on a database server a URL with a
// password, which the configuration must mask.
const services = sharedServices();
let database: TestDatabase;
let databaseUrlWithPassword: string | null = null;
beforeAll(async () => {
  database = await createTestDatabase();
  if (database.url) {
    // The test server trusts local connections: a password in the URL is accepted and ignored.
    const url = new URL(database.url);
    url.password = DB_PASSWORD;
    databaseUrlWithPassword = url.toString();
  }
});
// Declared after sharedServices(): the service has stopped when its database is dropped.
afterAll(async () => {
  await database?.drop();
});
const adminService = (): Promise<TestService> =>
  services.start({
    ...ADMIN_ENV,
    CATALOG_MAX_FILE_BYTES: String(MAX_FILE_BYTES),
    ...(databaseUrlWithPassword ? { DATABASE_URL: databaseUrlWithPassword } : {}),
  });

/** The admin API of SPEC §8 over HTTP, every status it names, in XML and JSON. */
describe('admin API: catalog (SPEC §8)', () => {
  let service: TestService;
  let catalogUrl: string;

  function admin(
    path: string,
    init: RequestInit & { app?: string | null; accept?: string } = {},
  ): Promise<Answer> {
    const { app = 'admintest', accept, headers, ...rest } = init;
    return request(`${service.url}${REST}/admin/${path}`, {
      ...rest,
      headers: {
        Authorization: ADMIN_AUTHORIZATION,
        ...(app === null ? {} : { 'X-SVC-Application-Name': app }),
        ...(accept ? { Accept: accept } : {}),
        ...(headers as Record<string, string> | undefined),
      },
    });
  }

  /** A request with a path sent exactly as written (fetch would normalise `..` and `%2E%2E`). */
  function rawAdmin(
    method: string,
    path: string,
    body?: Buffer,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; text: string }> {
    const { hostname, port } = new URL(service.url);
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        {
          hostname,
          port,
          method,
          path: `${REST}/admin/${path}`,
          headers: {
            Authorization: ADMIN_AUTHORIZATION,
            'X-SVC-Application-Name': 'rawpaths',
            ...headers,
          },
        },
        (res) => {
          let text = '';
          res.on('data', (chunk: Buffer) => (text += chunk.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  beforeAll(async () => {
    service = await adminService();
    catalogUrl = `${service.url}${REST}/admin/catalog`;
  });

  it('lists every section, empty at first, schema-valid XML and Jettison JSON', async () => {
    const xml = await admin('catalog', { accept: XML });
    expect(xml.status).toBe(200);
    expect(xml.headers.get('content-type')).toMatch(/^application\/vnd\.svc\+xml/);
    expect(await validateAgainstSchema(xml.text, 'rest-data.xsd')).toEqual({
      valid: true,
      errors: [],
    });
    const catalog = parseXml(xml.text).catalog as unknown as { directory: Array<{ type: string }> };
    expect(catalog.directory.map((d) => d.type)).toEqual([
      'R_SCRIPTS',
      'SWEAVE_FILES',
      'JOB_CONFIGURATIONS',
      'R_FUNCTIONS',
      'EMAIL_REPLIES',
    ]);
    const json = await admin('catalog', { accept: JSON_TYPE });
    expect(json.status).toBe(200);
    expect(JSON.parse(json.text)).toEqual({
      catalog: {
        directory: [
          { type: 'R_SCRIPTS' },
          { type: 'SWEAVE_FILES' },
          { type: 'JOB_CONFIGURATIONS' },
          { type: 'R_FUNCTIONS' },
          { type: 'EMAIL_REPLIES' },
        ],
      },
    });
  });

  it('PUT creates (201 + Location), replaces (204), GET reads, DELETE removes (204, then 404)', async () => {
    const created = await admin('catalog/R_SCRIPTS/hello.R', {
      method: 'PUT',
      body: 'writeLines("one", "out.txt")\n',
    });
    expect(created.status).toBe(201);
    const location = created.headers.get('location');
    expect(location).toBe(`${catalogUrl}/R_SCRIPTS/hello.R`);

    const read = await request(location ?? '', {
      headers: { 'X-SVC-Application-Name': 'admintest', Authorization: ADMIN_AUTHORIZATION },
    });
    expect(read.status).toBe(200);
    expect(read.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(read.text).toBe('writeLines("one", "out.txt")\n');

    const replaced = await admin('catalog/R_SCRIPTS/hello.R', {
      method: 'PUT',
      body: 'writeLines("two", "out.txt")\n',
    });
    expect(replaced.status).toBe(204);
    expect(replaced.headers.get('location')).toBeNull();
    expect((await admin('catalog/R_SCRIPTS/hello.R')).text).toBe('writeLines("two", "out.txt")\n');

    // The listing names the file with the link it was created at, in both formats.
    const xml = await admin('catalog', { accept: XML });
    expect(await validateAgainstSchema(xml.text, 'rest-data.xsd')).toMatchObject({ valid: true });
    expect(xml.text).toContain(`<file name="hello.R" dataUri="${location}"/>`);
    const json = JSON.parse((await admin('catalog', { accept: JSON_TYPE })).text) as {
      catalog: { directory: Array<{ type: string; file?: unknown }> };
    };
    expect(json.catalog.directory[0]).toEqual({
      type: 'R_SCRIPTS',
      file: { name: 'hello.R', dataUri: location },
    });

    // Another application does not see it.
    expect((await admin('catalog/R_SCRIPTS/hello.R', { app: 'someoneelse' })).status).toBe(404);

    expect((await admin('catalog/R_SCRIPTS/hello.R', { method: 'DELETE' })).status).toBe(204);
    const gone = await admin('catalog/R_SCRIPTS/hello.R', { method: 'DELETE', accept: JSON_TYPE });
    expect(gone.status).toBe(404);
    expect(JSON.parse(gone.text)).toMatchObject({ error: { status: 404, error: 'Not Found' } });
    const missing = await admin('catalog/R_SCRIPTS/hello.R', { accept: XML });
    expect(missing.status).toBe(404);
    expect(parseXml(missing.text).error.status).toBe('404');
  });

  it('a catalog change is used by the next job without a restart', async () => {
    const runJob = async (): Promise<string> => {
      const zip = await makeZip([{ name: 'input.txt', content: 'x\n' }]);
      const submitted = await postZip(service.url, zip, {
        'X-SVC-Application-Name': 'admintest',
        'X-SVC-Meta-rScript': 'version.R',
      });
      expect(submitted.status).toBe(202);
      const result = parseXml(
        (await waitForResult(parseXml(submitted.text).jobToken.resultUri)).text,
      ).result;
      expect(result.success).toBe('true');
      return (await request(result.dataUri)).body.toString('latin1');
    };
    const put = (version: string) =>
      admin('catalog/R_SCRIPTS/version.R', {
        method: 'PUT',
        body: `writeLines("${version}", "version-${version}.txt")\n`,
      });
    expect((await put('first')).status).toBe(201);
    expect(await runJob()).toContain('version-first.txt');
    expect((await put('second')).status).toBe(204);
    const second = await runJob();
    expect(second).toContain('version-second.txt');
    expect(second).not.toContain('version-first.txt');
  });

  it('400 for an unknown section or a name that is not a plain file name', async () => {
    for (const method of ['GET', 'PUT', 'DELETE']) {
      const answer = await admin('catalog/NO_SUCH_SECTION/a.R', {
        method,
        body: method === 'PUT' ? '1' : undefined,
        accept: JSON_TYPE,
      });
      expect([method, answer.status]).toEqual([method, 400]);
      expect(JSON.parse(answer.text).error.message).toContain('not a catalog section');
    }
    const badNames = [
      'a%2Fb.R', // an encoded slash
      'a%5Cb.R', // a backslash
      'dir/b.R', // a second path segment
      '..', // the parent, sent raw
      '%2E%2E', // the parent, encoded
      '..%2Fescape.R',
      'a..b.R',
      'bad%00name.R', // control characters
      'bad%0Aname.R',
      'bad%1Fname.R',
      'x'.repeat(256),
    ];
    for (const name of badNames) {
      for (const method of ['GET', 'PUT', 'DELETE']) {
        const answer = await rawAdmin(
          method,
          `catalog/R_SCRIPTS/${name}`,
          method === 'PUT' ? Buffer.from('1') : undefined,
        );
        expect([name, method, answer.status]).toEqual([name, method, 400]);
        expect(parseXml(answer.text).error.status).toBe('400');
      }
    }
    // Nothing was stored under any of those names.
    const listing = await admin('catalog', { app: 'rawpaths', accept: JSON_TYPE });
    expect(listing.text).not.toContain('"file"');
  });

  it('400 without a valid X-SVC-Application-Name', async () => {
    expect((await admin('catalog', { app: null })).status).toBe(400);
    expect((await admin('catalog', { app: 'bad name' })).status).toBe(400);
    const put = await admin('catalog/R_SCRIPTS/a.R', { method: 'PUT', body: '1', app: null });
    expect(put.status).toBe(400);
  });

  it('413 for a file over CATALOG_MAX_FILE_BYTES, with or without Content-Length', async () => {
    const tooBig = Buffer.alloc(MAX_FILE_BYTES + 1, 'a');
    const declared = await admin('catalog/R_SCRIPTS/big.R', {
      app: 'rawpaths',
      method: 'PUT',
      body: tooBig,
    });
    expect(declared.status).toBe(413);
    expect(parseXml(declared.text).error.message).toContain(`${MAX_FILE_BYTES} bytes`);
    const chunked = await rawAdmin('PUT', 'catalog/R_SCRIPTS/big.R', tooBig, {
      'Transfer-Encoding': 'chunked',
    });
    expect(chunked.status).toBe(413);
    expect((await admin('catalog/R_SCRIPTS/big.R', { app: 'rawpaths' })).status).toBe(404);
    const exact = await admin('catalog/R_SCRIPTS/big.R', {
      app: 'rawpaths',
      method: 'PUT',
      body: Buffer.alloc(MAX_FILE_BYTES, 'a'),
    });
    expect(exact.status).toBe(201);
  });

  it('405 with Allow for other methods', async () => {
    const onCatalog = await admin('catalog', { method: 'POST', body: 'x' });
    expect(onCatalog.status).toBe(405);
    expect(onCatalog.headers.get('allow')).toBe('GET, HEAD');
    const onFile = await admin('catalog/R_SCRIPTS/a.R', { method: 'POST', body: 'x' });
    expect(onFile.status).toBe(405);
    expect(onFile.headers.get('allow')).toBe('GET, HEAD, PUT, DELETE');
    const onConfiguration = await admin('system/configuration', { method: 'PUT', body: '{}' });
    expect(onConfiguration.status).toBe(405);
    expect(onConfiguration.headers.get('allow')).toBe('GET, HEAD');
  });
});

describe('admin API: configuration (SPEC §8)', () => {
  let service: TestService;

  beforeAll(async () => {
    // The service of the catalog's describe above.
    service = await adminService();
  });

  it('answers the effective configuration as JSON with secrets masked', async () => {
    const answer = await request(`${service.url}${REST}/admin/system/configuration`, {
      headers: { Authorization: ADMIN_AUTHORIZATION },
    });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
    const configuration = JSON.parse(answer.text) as Record<string, unknown>;
    expect(configuration).toMatchObject({
      port: 0,
      role: 'all',
      catalogMaxFileBytes: service.config.catalogMaxFileBytes,
    });
    expect(Object.keys(configuration).sort()).toEqual(Object.keys(service.config).sort());
    expect(answer.text).not.toContain(TEST_ADMIN_PASSWORD);
    if (databaseUrlWithPassword) {
      expect(answer.text).not.toContain(DB_PASSWORD);
      expect(configuration.databaseUrl).toMatch(/^postgres:\/\/postgres:\*{8}@/);
    } else {
      expect(configuration.databaseUrl).toBeNull();
    }
  });
});
