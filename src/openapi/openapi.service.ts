import { Injectable } from '@nestjs/common';
import { dump } from 'js-yaml';
import { SERVICE_VERSION } from '../config/app-config';
import { RestApiConfig, SecurityConfig } from '../config/config-slices';
import { authMethodsOf } from '../config/security-settings';
import { loadOpenApiDocument, withBaseUrl } from './openapi-document';
import type { OpenApiDocument } from './openapi-objects';

/** The OpenAPI document of this node (its limits, its version, openapi.yaml) for a public base URL. */
@Injectable()
export class OpenApiService {
  private readonly loaded: OpenApiDocument;

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
    return JSON.stringify(this.document(baseUrl), null, 2);
  }

  yaml(baseUrl: string): string {
    // noRefs: responses shared between operations are written out, not as YAML aliases.
    return dump(this.document(baseUrl), { noRefs: true, lineWidth: -1 });
  }
}
