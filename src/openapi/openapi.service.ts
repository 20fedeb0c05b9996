import { Injectable } from '@nestjs/common';
import { dump } from 'js-yaml';
import { AppConfig } from '../config/app-config';
import { authMethodsOf } from '../config/security-settings';
import { SERVICE_VERSION } from '../config/app-config';
import { buildOpenApiDocument } from './openapi-document';
import type { OpenApiDocument } from './openapi-objects';

/** The OpenAPI document of this node (its limits, its version) for a public base URL. */
@Injectable()
export class OpenApiService {
  constructor(private readonly config: AppConfig) {}

  document(baseUrl: string): OpenApiDocument {
    return buildOpenApiDocument({
      baseUrl,
      version: SERVICE_VERSION,
      waitMaxSeconds: this.config.resultWaitMaxSeconds,
      oidcIssuer: authMethodsOf(this.config.authMode).has('oidc') ? this.config.oidcIssuer : null,
    });
  }

  json(baseUrl: string): string {
    return JSON.stringify(this.document(baseUrl), null, 2);
  }

  yaml(baseUrl: string): string {
    // noRefs: responses shared between operations are written out, not as YAML aliases.
    return dump(this.document(baseUrl), { noRefs: true, lineWidth: -1 });
  }
}
