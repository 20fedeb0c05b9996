import { Injectable } from '@nestjs/common';
import { dump } from 'js-yaml';
import { SERVICE_VERSION } from '../config/app-config';
import { RestApiConfig, SecurityConfig } from '../config/config-slices';
import { authMethodsOf } from '../config/security-settings';
import { loadOpenApiDocument, withBaseUrl } from './openapi-document';
import type { OpenApiDocument } from './openapi-objects';

/**
 * Base URLs whose rendered documents are kept. A node is reached by one or a few (the public
 * one, an internal one); without PUBLIC_BASE_URL the Host header picks it, so the count is kept
 * bounded.
 */
const RENDERED_BASE_URLS = 4;

interface Rendered {
  json?: string;
  yaml?: string;
}

/** The OpenAPI document of this node (its limits, its version, openapi.yaml) for a public base URL. */
@Injectable()
export class OpenApiService {
  private readonly loaded: OpenApiDocument;
  /** By base URL, least recently used first. */
  private readonly rendered = new Map<string, Rendered>();

  constructor(rest: RestApiConfig, security: SecurityConfig) {
    this.loaded = loadOpenApiDocument({
      version: SERVICE_VERSION,
      waitMaxSeconds: rest.resultWaitMaxSeconds,
      oidcIssuer: authMethodsOf(security.authMode).has('oidc') ? security.oidcIssuer : null,
    });
  }

  document(baseUrl: string): OpenApiDocument {
    return withBaseUrl(this.loaded, baseUrl);
  }

  json(baseUrl: string): string {
    const rendered = this.renderedFor(baseUrl);
    rendered.json ??= JSON.stringify(this.document(baseUrl), null, 2);
    return rendered.json;
  }

  yaml(baseUrl: string): string {
    const rendered = this.renderedFor(baseUrl);
    // noRefs: responses shared between operations are written out, not as YAML aliases.
    rendered.yaml ??= dump(this.document(baseUrl), { noRefs: true, lineWidth: -1 });
    return rendered.yaml;
  }

  private renderedFor(baseUrl: string): Rendered {
    const rendered = this.rendered.get(baseUrl) ?? {};
    this.rendered.delete(baseUrl);
    this.rendered.set(baseUrl, rendered);
    if (this.rendered.size > RENDERED_BASE_URLS) {
      this.rendered.delete(this.rendered.keys().next().value as string);
    }
    return rendered;
  }
}
