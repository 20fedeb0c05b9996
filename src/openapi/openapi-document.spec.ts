import 'reflect-metadata';
import { METHOD_METADATA, MODULE_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { RequestMethod } from '@nestjs/common';
import { OpenApiChecker, validateOpenApiDocument } from '../../test/support/openapi-validation';
import { ApiModule } from '../api.module';
import { REST_PREFIX } from '../common/public-uri';
import { buildOpenApiDocument } from './openapi-document';
import type { MediaTypeObject, OpenApiDocument, ResponseObject } from './openapi-objects';

const BASE_URL = 'https://svc.example.org';

function build(): OpenApiDocument {
  return buildOpenApiDocument({ baseUrl: BASE_URL, version: '0.1.0', waitMaxSeconds: 60 });
}

const pointer = (segments: string[]): string =>
  segments.map((segment) => `/${segment.replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');

interface DocumentedContent {
  where: string;
  schemaPointer: string;
  mediaType: string;
  content: MediaTypeObject;
}

/** Every response body the document describes: the shared responses and the operations' own. */
function documentedContents(document: OpenApiDocument): DocumentedContent[] {
  const responses: Array<[string, string[], ResponseObject]> = Object.entries(
    document.components.responses,
  ).map(([name, response]) => [name, ['components', 'responses', name], response]);
  for (const [path, item] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      for (const [status, response] of Object.entries(operation.responses)) {
        if (!('$ref' in response)) {
          const segments = ['paths', path, method, 'responses', status];
          responses.push([`${method.toUpperCase()} ${path} ${status}`, segments, response]);
        }
      }
    }
  }
  return responses.flatMap(([where, segments, response]) =>
    Object.entries(response.content ?? {}).map(([mediaType, content]) => ({
      where,
      schemaPointer: pointer([...segments, 'content', mediaType, 'schema']),
      mediaType,
      content,
    })),
  );
}

/** `GET /jobs/{app}/{jobId}` for every route the REST controllers serve (not their 405 catch-alls). */
function servedRoutes(): string[] {
  const controllers = Reflect.getMetadata(MODULE_METADATA.CONTROLLERS, ApiModule) as Array<
    new () => unknown
  >;
  const routes: string[] = [];
  for (const controller of controllers) {
    const base = String(Reflect.getMetadata(PATH_METADATA, controller));
    if (!`/${base}`.startsWith(REST_PREFIX)) {
      continue;
    }
    const prototype = controller.prototype as Record<string, unknown>;
    for (const name of Object.getOwnPropertyNames(prototype)) {
      const handler = prototype[name];
      const method =
        typeof handler === 'function'
          ? (Reflect.getMetadata(METHOD_METADATA, handler) as unknown)
          : undefined;
      if (typeof handler !== 'function' || method === undefined || method === RequestMethod.ALL) {
        continue;
      }
      const paths = [Reflect.getMetadata(PATH_METADATA, handler) as string | string[]].flat();
      for (const path of paths) {
        const template = `/${base}/${path}`
          .replace(/\/+$/, '')
          .replace(/\/{2,}/g, '/')
          .slice(REST_PREFIX.length)
          .replace(/[:*](\w+)/g, '{$1}')
          // The data route takes one segment, `{jobId}.{type}`, and splits it itself.
          .replace('/result/{app}/{file}', '/result/{app}/{jobId}.{type}');
        routes.push(`${RequestMethod[method as RequestMethod]} ${template || '/'}`);
      }
    }
  }
  // One operation may have two handlers (the log's text and event stream, chosen by Accept).
  return [...new Set(routes)].sort();
}

describe('the OpenAPI document of the REST API', () => {
  const document = build();

  it('is a valid OpenAPI 3.1 document', () => {
    const verdict = validateOpenApiDocument(document);
    expect(verdict.errors).toBeUndefined();
    expect(verdict).toEqual({ valid: true, version: '3.1' });
  });

  it('declares the credentials per operation; openIdConnect where an issuer is configured', () => {
    const issuer = 'https://keycloak.example.com/realms/company';
    const withOidc = buildOpenApiDocument({
      baseUrl: BASE_URL,
      version: '0.1.0',
      waitMaxSeconds: 60,
      oidcIssuer: issuer,
    });
    expect(validateOpenApiDocument(withOidc)).toEqual({ valid: true, version: '3.1' });
    expect(withOidc.components.securitySchemes.openIdConnect).toEqual({
      type: 'openIdConnect',
      openIdConnectUrl: `${issuer}/.well-known/openid-configuration`,
      description: expect.stringContaining('Authorization: Bearer'),
    });
    expect(document.components.securitySchemes.openIdConnect).toBeUndefined();
    const securityOf = (doc: OpenApiDocument, path: string, method: string) =>
      (doc.paths[path] as Record<string, { security?: unknown }>)[method].security;
    const jobs = '/jobs';
    expect(securityOf(withOidc, jobs, 'post')).toEqual([
      {},
      { basic: [] },
      { apiKey: [] },
      { bearerApiKey: [] },
      { openIdConnect: [] },
    ]);
    expect(securityOf(document, jobs, 'post')).toEqual([
      {},
      { basic: [] },
      { apiKey: [] },
      { bearerApiKey: [] },
    ]);
    expect(securityOf(withOidc, '/admin/catalog', 'get')).toEqual([
      { basic: [] },
      { apiKey: [] },
      { bearerApiKey: [] },
      { openIdConnect: [] },
    ]);
  });

  it('has only schemas that compile as strict JSON Schema 2020-12', () => {
    const checker = new OpenApiChecker(
      JSON.parse(JSON.stringify(document)) as Record<string, unknown>,
    );
    const pointers = [
      ...Object.keys(document.components.schemas).map((name) =>
        pointer(['components', 'schemas', name]),
      ),
      ...documentedContents(document).map((content) => content.schemaPointer),
    ];
    // Compiling is the check: strict ajv throws on an unknown keyword, type or format.
    for (const pointer of pointers) {
      expect(() => checker.validateAt(pointer, null)).not.toThrow();
    }
    expect(pointers.length).toBeGreaterThan(100);
  });

  it('describes every route the REST controllers serve, and nothing else', () => {
    const documented = Object.entries(document.paths)
      .flatMap(([path, item]) =>
        Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`),
      )
      // Express answers HEAD with the GET route.
      .filter((route) => !route.startsWith('HEAD '))
      .sort();
    expect(documented).toEqual(servedRoutes());
  });

  it('gives every operation a unique id, and its links the base URL', () => {
    const ids = Object.values(document.paths).flatMap((item) =>
      Object.values(item).map((operation) => operation.operationId),
    );
    expect(new Set(ids).size).toBe(ids.length);
    expect(document.servers).toEqual([
      { url: `${BASE_URL}${REST_PREFIX}`, description: 'This service' },
    ]);
  });

  it('has examples that match its JSON Schemas and rest-data.xsd', async () => {
    const checker = new OpenApiChecker(
      JSON.parse(JSON.stringify(document)) as Record<string, unknown>,
    );
    const problems: string[] = [];
    let checked = 0;
    for (const { where, schemaPointer, mediaType, content } of documentedContents(document)) {
      for (const example of Object.values(content.examples ?? {})) {
        checked++;
        const body =
          typeof example.value === 'string' ? example.value : JSON.stringify(example.value);
        problems.push(...(await checker.bodyProblems(schemaPointer, mediaType, body, where)));
      }
    }
    expect(problems).toEqual([]);
    expect(checked).toBeGreaterThan(50);
  });

  it('writes a list of one result as an object and of several as an array (Jettison)', () => {
    const checker = new OpenApiChecker(
      JSON.parse(JSON.stringify(document)) as Record<string, unknown>,
    );
    const pointer = '/components/schemas/ResultsJson';
    const result = {
      jobId: '3f6c1a52-8d0e-4b7a-9c1e-2b5d7f4e9a10',
      applicationName: 'demo',
      resultTime: '2026-11-22T09:16:23.456Z',
      success: true,
      type: 'zip',
      selfUri: 'http://h/x',
      dataUri: 'http://h/x.zip',
    };
    expect(checker.validateAt(pointer, { results: '' })).toEqual([]);
    expect(checker.validateAt(pointer, { results: { result } })).toEqual([]);
    expect(checker.validateAt(pointer, { results: { result: [result, result] } })).toEqual([]);
    expect(checker.validateAt(pointer, { results: { result: [result] } })).not.toEqual([]);
    expect(
      checker.validateAt(pointer, { results: { result: { ...result, success: 'true' } } }),
    ).not.toEqual([]);
  });
});
