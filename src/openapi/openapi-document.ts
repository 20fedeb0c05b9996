import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { load } from 'js-yaml';
import type { OpenApiDocument } from './openapi-objects';

/** The description's source, beside this file in src/ and in dist/ (`npm run build` copies it). */
export const OPENAPI_SOURCE = join(__dirname, 'openapi.yaml');

/** What the description takes from the configuration (the header of openapi.yaml lists where). */
export interface OpenApiSettings {
  version: string;
  /** RESULT_WAIT_MAX_SECONDS: the largest `wait` this node takes. */
  waitMaxSeconds: number;
  /** OIDC_ISSUER when AUTH_MODE includes oidc, else null: no openIdConnect scheme. */
  oidcIssuer: string | null;
}

const PLACEHOLDER = /\{(baseUrl|version|waitMaxSeconds|oidcIssuer)\}/g;

/** Reads openapi.yaml once, at start-up, and applies the configuration to it. */
export function loadOpenApiDocument(
  settings: OpenApiSettings,
  file = OPENAPI_SOURCE,
): OpenApiDocument {
  const parsed = load(readFileSync(file, 'utf8')) as Partial<OpenApiDocument> | null;
  if (parsed?.openapi !== '3.1.0' || !parsed.paths || !parsed.components?.securitySchemes) {
    throw new Error(
      `${file} is no OpenAPI 3.1 document with paths and securitySchemes; restore it from the repository.`,
    );
  }
  const values: Record<string, string> = {
    version: settings.version,
    waitMaxSeconds: String(settings.waitMaxSeconds),
  };
  if (settings.oidcIssuer) {
    values.oidcIssuer = settings.oidcIssuer.replace(/\/$/, '');
  } else {
    delete parsed.components.securitySchemes.openIdConnect;
  }
  const document = substitute(parsed, values) as OpenApiDocument;
  for (const operation of Object.values(document.paths).flatMap((item) => Object.values(item))) {
    if (!settings.oidcIssuer) {
      operation.security = operation.security.filter((scheme) => !('openIdConnect' in scheme));
    }
    for (const parameter of operation.parameters ?? []) {
      if ('in' in parameter && parameter.in === 'query' && parameter.name === 'wait') {
        parameter.schema.maximum = settings.waitMaxSeconds;
      }
    }
  }
  return document;
}

/**
 * A copy whose links carry the request's public base URL (PUBLIC_BASE_URL, else its host), like
 * every link the API gives; hence per request.
 */
export function withBaseUrl(document: OpenApiDocument, baseUrl: string): OpenApiDocument {
  return substitute(document, { baseUrl }) as OpenApiDocument;
}

/** A deep copy with the named placeholders in its strings replaced; other braces stay. */
function substitute(value: unknown, values: Record<string, string>): unknown {
  if (typeof value === 'string') {
    return value.replace(PLACEHOLDER, (match, name: string) => values[name] ?? match);
  }
  if (Array.isArray(value)) {
    return value.map((item) => substitute(item, values));
  }
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [key, substitute(item, values)]),
    );
  }
  return value;
}
