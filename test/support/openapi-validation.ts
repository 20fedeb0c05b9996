import { execFileSync } from 'node:child_process';
import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { parseXml } from './rest-client';
import { validateAgainstSchema } from './xml-schema';

/**
 * Checks HTTP answers against an OpenAPI 3.1 document: the status is documented for the
 * operation, the Content-Type is one of its media types, a JSON body validates against that
 * media type's schema (ajv, JSON Schema 2020-12) and an XML body against rest-data.xsd, with the
 * root element the schema names.
 */

type JsonObject = Record<string, unknown>;

/** Keywords of an OpenAPI document that are not JSON Schema: annotations for ajv. */
const OPENAPI_KEYWORDS = [
  'openapi',
  'info',
  'servers',
  'paths',
  'components',
  'tags',
  'externalDocs',
  'xml',
  'example',
  'discriminator',
];

const DOCUMENT_ID = 'urn:svc:openapi';

function pointerSegment(segment: string): string {
  return segment.replace(/~/g, '~0').replace(/\//g, '~1');
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export interface Exchange {
  method: string;
  /** The path template of the operation, e.g. `/jobs/{app}/{jobId}`. */
  path: string;
  status: number;
  contentType: string | null;
  body: string;
}

export class OpenApiChecker {
  private readonly ajv: Ajv2020;
  private readonly compiled = new Map<string, ValidateFunction>();
  /** XSD verdicts by body: libxml2 in WebAssembly is slow to start, and bodies repeat. */
  private readonly xsdVerdicts = new Map<string, Promise<{ valid: boolean; errors: string[] }>>();

  constructor(readonly document: JsonObject) {
    this.ajv = new Ajv2020({ allErrors: true, strict: true });
    addFormats(this.ajv);
    this.ajv.addFormat('binary', true);
    this.ajv.addVocabulary(OPENAPI_KEYWORDS);
    this.ajv.addSchema(document, DOCUMENT_ID);
  }

  /** The operation object, or undefined when the document has none. */
  operation(method: string, path: string): JsonObject | undefined {
    const item = (this.document.paths as JsonObject)[path];
    const operation = isObject(item) ? item[method.toLowerCase()] : undefined;
    return isObject(operation) ? operation : undefined;
  }

  /** Resolves a local `$ref` of the document. */
  resolve(value: unknown): unknown {
    if (isObject(value) && typeof value.$ref === 'string' && value.$ref.startsWith('#/')) {
      let target: unknown = this.document;
      for (const segment of value.$ref.slice(2).split('/')) {
        target = (target as JsonObject)[segment.replace(/~1/g, '/').replace(/~0/g, '~')];
      }
      return this.resolve(target);
    }
    return value;
  }

  /** The XML element names a schema allows: its `xml.name`, or those of its oneOf. */
  xmlElements(schema: unknown): string[] {
    const resolved = this.resolve(schema);
    if (!isObject(resolved)) {
      return [];
    }
    if (Array.isArray(resolved.oneOf)) {
      return resolved.oneOf.flatMap((option) => this.xmlElements(option));
    }
    const xml = resolved.xml;
    return isObject(xml) && typeof xml.name === 'string' ? [xml.name] : [];
  }

  /** Validates `value` against the schema at a JSON pointer of the document; returns errors. */
  validateAt(pointer: string, value: unknown): string[] {
    let validate = this.compiled.get(pointer);
    if (!validate) {
      validate = this.ajv.compile({ $ref: `${DOCUMENT_ID}#${pointer}` });
      this.compiled.set(pointer, validate);
    }
    return validate(value)
      ? []
      : (validate.errors ?? []).map((error) => `${error.instancePath || '/'} ${error.message}`);
  }

  /** Everything wrong with an answer, as sentences; empty when it matches the document. */
  async problems(exchange: Exchange): Promise<string[]> {
    const where = `${exchange.method.toUpperCase()} ${exchange.path} ${exchange.status}`;
    const operation = this.operation(exchange.method, exchange.path);
    if (!operation) {
      return [`${where}: no such operation in the document`];
    }
    const documented = (operation.responses as JsonObject)[String(exchange.status)];
    const response = this.resolve(documented);
    if (!isObject(response)) {
      return [`${where}: status not documented`];
    }
    const content = isObject(response.content) ? response.content : {};
    if (exchange.body === '' && (exchange.method === 'HEAD' || Object.keys(content).length === 0)) {
      return [];
    }
    const mediaType = (exchange.contentType ?? '').split(';')[0].trim().toLowerCase();
    const key = mediaType in content ? mediaType : '*/*' in content ? '*/*' : null;
    if (key === null) {
      return [`${where}: Content-Type ${mediaType || '(none)'} not documented`];
    }
    // A shared response is checked where it is defined, in components.responses.
    const responsePointer =
      isObject(documented) && typeof documented.$ref === 'string'
        ? documented.$ref.slice(1)
        : [
            '',
            'paths',
            exchange.path,
            exchange.method.toLowerCase(),
            'responses',
            String(exchange.status),
          ]
            .map(pointerSegment)
            .join('/');
    return this.bodyProblems(
      `${responsePointer}/content/${pointerSegment(key)}/schema`,
      mediaType,
      exchange.body,
      where,
    );
  }

  /** Everything wrong with a body of `mediaType` for the schema at a JSON pointer. */
  async bodyProblems(
    schemaPointer: string,
    mediaType: string,
    body: string,
    where: string,
  ): Promise<string[]> {
    if (mediaType.endsWith('json')) {
      let value: unknown;
      try {
        value = JSON.parse(body);
      } catch {
        return [`${where}: ${mediaType} body is not JSON`];
      }
      return this.validateAt(schemaPointer, value).map(
        (error) => `${where} ${mediaType}: ${error}`,
      );
    }
    const elements = this.xmlElements({ $ref: `#${schemaPointer}` });
    if (elements.length === 0) {
      return [];
    }
    const root = Object.keys(parseXml(body)).find((name) => name !== '?xml');
    let verdict = this.xsdVerdicts.get(body);
    if (!verdict) {
      verdict = validateAgainstSchema(body, 'rest-data.xsd');
      this.xsdVerdicts.set(body, verdict);
    }
    const { valid, errors } = await verdict;
    return [
      ...(root !== undefined && elements.includes(root)
        ? []
        : [`${where}: root element ${root} is not ${elements.join(' or ')}`]),
      ...(valid ? [] : errors.map((error) => `${where} ${mediaType}: ${error}`)),
    ];
  }
}

/** What @seriousme/openapi-schema-validator says of a document. */
export interface OpenApiVerdict {
  valid: boolean;
  /** The OpenAPI version whose schema it matched, e.g. "3.1". */
  version?: string;
  errors?: unknown;
}

/**
 * Validates a document against the OpenAPI schema of its version. The validator is ES modules
 * only, which jest's module system cannot load, so plain Node runs it, reading the document
 * from stdin.
 */
export function validateOpenApiDocument(document: object): OpenApiVerdict {
  const script = `
    import { Validator } from '@seriousme/openapi-schema-validator';
    import { readFileSync } from 'node:fs';
    const validator = new Validator();
    const result = await validator.validate(JSON.parse(readFileSync(0, 'utf8')));
    process.stdout.write(JSON.stringify({ ...result, version: validator.version }));`;
  const output = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    input: JSON.stringify(document),
    cwd: __dirname,
    encoding: 'utf8',
  });
  return JSON.parse(output) as OpenApiVerdict;
}
