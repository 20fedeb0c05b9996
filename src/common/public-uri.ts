import type { Request } from 'express';

export const REST_PREFIX = '/svc/api/rest';

const HOST = /^[A-Za-z0-9.\-_[\]:]+$/;

function firstValue(header: string | string[] | undefined): string | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  return value?.split(',')[0]?.trim() || undefined;
}

/**
 * Whether the peer of the connection is a proxy TRUST_PROXY names (Express's compiled `trust
 * proxy` rule, set in bootstrap.ts): only then are its X-Forwarded-* headers believed.
 */
function fromTrustedProxy(req: Request): boolean {
  const trust: unknown = req.app?.get('trust proxy fn');
  return (
    typeof trust === 'function' &&
    (trust as (address: string, hop: number) => boolean)(req.socket.remoteAddress ?? '', 0)
  );
}

/**
 * The service's public base URL as the client sees it: PUBLIC_BASE_URL when configured, else
 * the connection's scheme and Host; from a proxy TRUST_PROXY trusts, scheme from
 * X-Forwarded-Proto / X-Forwarded-Protocol and host from X-Forwarded-Host instead. Malformed
 * forwarded values are ignored, not echoed; `Forwarded` (RFC 7239) is never read.
 */
export function publicBaseUrl(req: Request, configured: string | null): string {
  if (configured) {
    return configured.replace(/\/+$/, '');
  }
  const host = req.headers.host && HOST.test(req.headers.host) ? req.headers.host : 'localhost';
  // The connection's own scheme (not req.protocol, which takes a trusted proxy's word unchecked).
  const connectionScheme = 'encrypted' in req.socket ? 'https' : 'http';
  if (!fromTrustedProxy(req)) {
    return `${connectionScheme}://${host}`;
  }
  const forwardedProto =
    firstValue(req.headers['x-forwarded-proto']) ?? firstValue(req.headers['x-forwarded-protocol']);
  const scheme =
    forwardedProto && /^https?$/i.test(forwardedProto)
      ? forwardedProto.toLowerCase()
      : connectionScheme;
  const forwardedHost = firstValue(req.headers['x-forwarded-host']);
  return `${scheme}://${forwardedHost && HOST.test(forwardedHost) ? forwardedHost : host}`;
}

/**
 * A job's page in the operator console: THE link to a job everywhere (the console's API, the
 * upload page, the audit trail's jobUri).
 */
export function consoleJobUri(base: string, applicationName: string, jobId: string): string {
  return `${base}/svc/console/#/jobs/${applicationName}/${jobId}`;
}

/** Absolute links of the REST resources. */
export class RestLinks {
  constructor(private readonly base: string) {}

  applicationResults(applicationName: string): string {
    return `${this.base}${REST_PREFIX}/results/${applicationName}`;
  }
  result(applicationName: string, jobId: string): string {
    return `${this.base}${REST_PREFIX}/results/${applicationName}/${jobId}`;
  }
  resultData(applicationName: string, jobId: string, type: string): string {
    return `${this.base}${REST_PREFIX}/result/${applicationName}/${jobId}.${type}`;
  }
  jobStatus(applicationName: string, jobId: string): string {
    return `${this.base}${REST_PREFIX}/jobs/${applicationName}/${jobId}`;
  }
  flow(applicationName: string, flowId: string): string {
    return `${this.base}${REST_PREFIX}/flows/${applicationName}/${flowId}`;
  }
}
