import 'reflect-metadata';
import { RequestMethod } from '@nestjs/common';
import { PATH_METADATA } from '@nestjs/common/constants';
import { MetadataScanner } from '@nestjs/core';
import { NestContainer } from '@nestjs/core/injector/container';
import { NoopGraphInspector } from '@nestjs/core/inspector/noop-graph-inspector';
import { PathsExplorer } from '@nestjs/core/router/paths-explorer';
import { DependenciesScanner } from '@nestjs/core/scanner';
import { OpenApiChecker, validateOpenApiDocument } from '../../test/support/openapi-validation';
import { ApiModule } from '../api.module';
import { AUDIT_ACTIONS } from '../audit/audit.service';
import { APPLICATION_SETTING_FIELDS } from '../config/application-settings';
import {
  APPLICATION_SECURITY_FLAGS,
  APPLICATION_SECURITY_LISTS,
} from '../config/security-settings';
import { REST_PREFIX } from '../common/public-uri';
import { loadOpenApiDocument, withBaseUrl } from './openapi-document';
import type { MediaTypeObject, OpenApiDocument, ResponseObject } from './openapi-objects';

const BASE_URL = 'https://svc.example.org';

/** A schema's properties, as far as this spec reads them. */
interface SchemaProperties {
  properties: Record<string, { type?: unknown; title?: string; readOnly?: boolean }>;
}

function build(oidcIssuer: string | null = null): OpenApiDocument {
  return withBaseUrl(
    loadOpenApiDocument({ version: '0.1.0', waitMaxSeconds: 60, oidcIssuer }),
    BASE_URL,
  );
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

/**
 * `GET /jobs/{app}/{jobId}` for every route Nest registers under the REST prefix, found as Nest
 * finds them: the module graph of ApiModule scanned, then each controller's handlers. The `@All`
 * catch-all (404) is left out: OpenAPI has no place for it.
 */
async function servedRoutes(): Promise<string[]> {
  const container = new NestContainer();
  const metadataScanner = new MetadataScanner();
  await new DependenciesScanner(container, metadataScanner, NoopGraphInspector).scan(ApiModule);
  const explorer = new PathsExplorer(metadataScanner);
  const routes = new Set<string>();
  for (const module of container.getModules().values()) {
    for (const { metatype } of module.controllers.values()) {
      if (typeof metatype !== 'function') {
        continue;
      }
      const bases = [Reflect.getMetadata(PATH_METADATA, metatype) as string | string[]].flat();
      const prototype = metatype.prototype as object;
      for (const route of explorer.scanForPaths(prototype, prototype)) {
        if (route.requestMethod === RequestMethod.ALL) {
          continue;
        }
        for (const template of bases.flatMap((base) =>
          route.path.map((path) => `/${base}/${path}`.replace(/\/+$/, '').replace(/\/{2,}/g, '/')),
        )) {
          if (!template.startsWith(REST_PREFIX)) {
            continue;
          }
          const documented = template
            .slice(REST_PREFIX.length)
            .replace(/[:*](\w+)/g, '{$1}')
            // The data route takes one segment, `{jobId}.{type}`, and splits it itself.
            .replace('/result/{app}/{file}', '/result/{app}/{jobId}.{type}');
          routes.add(`${RequestMethod[route.requestMethod]} ${documented || '/'}`);
        }
      }
    }
  }
  return [...routes].sort();
}

/** `GET /jobs/{app}/{jobId}` for every operation of a document; HEAD is Express's, with GET. */
function documentedRoutes(document: OpenApiDocument): string[] {
  return Object.entries(document.paths)
    .flatMap(([path, item]) => Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`))
    .filter((route) => !route.startsWith('HEAD '))
    .sort();
}

/** What one side has and the other lacks, by route, so a failure names it. */
function routeDrift(served: string[], document: OpenApiDocument) {
  const documented = documentedRoutes(document);
  return {
    servedButNotDocumented: served.filter((route) => !documented.includes(route)),
    documentedButNotServed: documented.filter((route) => !served.includes(route)),
  };
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
    const withOidc = build(issuer);
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

  it('describes every route the REST controllers serve, and nothing else', async () => {
    const served = await servedRoutes();
    expect(served.length).toBeGreaterThan(30);
    expect(routeDrift(served, document)).toEqual({
      servedButNotDocumented: [],
      documentedButNotServed: [],
    });
    // The check itself names what is missing, either way.
    const fewer = build();
    delete fewer.paths['/jobs/{app}/{jobId}/log'];
    expect(routeDrift(served, fewer)).toEqual({
      servedButNotDocumented: ['GET /jobs/{app}/{jobId}/log'],
      documentedButNotServed: [],
    });
    expect(routeDrift([...served, 'PUT /jobs/{app}/{jobId}/log'].sort(), document)).toEqual({
      servedButNotDocumented: ['PUT /jobs/{app}/{jobId}/log'],
      documentedButNotServed: [],
    });
    expect(routeDrift(served.slice(1), document).documentedButNotServed).toEqual([served[0]]);
  });

  it('applies the configuration: version, the largest wait, the base URL', () => {
    const other = withBaseUrl(
      loadOpenApiDocument({ version: '9.8.7', waitMaxSeconds: 3600, oidcIssuer: null }),
      'http://127.0.0.1:3000',
    );
    expect(other.info.version).toBe('9.8.7');
    const waits = Object.values(other.paths)
      .flatMap((item) => Object.values(item))
      .flatMap((operation) => operation.parameters ?? [])
      .filter((parameter) => 'name' in parameter && parameter.name === 'wait');
    expect(waits).toHaveLength(2);
    for (const wait of waits) {
      expect(wait).toMatchObject({
        schema: { type: 'integer', minimum: 1, maximum: 3600 },
        description: expect.stringContaining('(3600 on this node)'),
      });
    }
    expect(other.externalDocs.url).toBe('http://127.0.0.1:3000/svc/wsdl/rest-data.xsd');
    const text = JSON.stringify(other);
    expect(text).not.toMatch(/\{(baseUrl|version|waitMaxSeconds|oidcIssuer)\}|svc\.example\.org/);
    expect(text.match(/http:\/\/127\.0\.0\.1:3000\//g)?.length).toBeGreaterThan(50);
  });

  it('lists the audit actions the service records', () => {
    const audit = document.paths['/admin/audit']?.get;
    const action = audit?.parameters?.find((p) => 'name' in p && p.name === 'action');
    expect(action).toMatchObject({ schema: { enum: [...AUDIT_ACTIONS] } });
    const page = (audit?.responses['200'] as ResponseObject).content?.['application/json'].schema;
    expect(page).toMatchObject({
      properties: {
        auditEvents: { items: { properties: { action: { enum: [...AUDIT_ACTIONS] } } } },
      },
    });
  });

  it('describes every application setting and right the service checks, with its type', () => {
    const schemas = document.components.schemas as unknown as Record<string, SchemaProperties>;
    const settings = schemas.ApplicationSettingsEntry.properties;
    // callbackSecretSet is the read-only stand-in of the secret in a GET answer.
    expect(
      Object.keys(settings)
        .filter((name) => name !== 'callbackSecretSet')
        .sort(),
    ).toEqual([...APPLICATION_SETTING_FIELDS].sort());
    const security = schemas.ApplicationSecurityEntry.properties;
    expect(Object.keys(security).sort()).toEqual(
      [...APPLICATION_SECURITY_LISTS, ...APPLICATION_SECURITY_FLAGS].sort(),
    );
    for (const name of APPLICATION_SECURITY_LISTS) {
      expect([name, security[name]]).toEqual([name, expect.objectContaining({ type: 'array' })]);
    }
    for (const name of APPLICATION_SECURITY_FLAGS) {
      expect([name, security[name].type]).toEqual([name, 'boolean']);
    }
    expect(settings.networkAllowed.type).toBe('boolean');
    expect(settings.callbackHosts.type).toBe('array');
    // Every field the form shows has a label.
    for (const [name, property] of [...Object.entries(settings), ...Object.entries(security)]) {
      expect([name, typeof property.title === 'string' || property.readOnly === true]).toEqual([
        name,
        true,
      ]);
    }
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
