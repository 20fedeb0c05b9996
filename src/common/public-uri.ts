import type { Request } from 'express';

export const REST_PREFIX = '/svc/api/rest';

const HOST = /^[A-Za-z0-9.\-_[\]:]+$/;

function firstValue(header: string | string[] | undefined): string | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  return value?.split(',')[0]?.trim() || undefined;
}

/**
 * The service's public base URL as the client sees it: PUBLIC_BASE_URL when configured, else
 * scheme from X-Forwarded-Proto / X-Forwarded-Protocol (or the connection) and host from
 * X-Forwarded-Host (or Host). Malformed forwarded values are ignored, not echoed.
 */
export function publicBaseUrl(req: Request, configured: string | null): string {
  if (configured) {
    return configured.replace(/\/+$/, '');
  }
  const forwardedProto =
    firstValue(req.headers['x-forwarded-proto']) ?? firstValue(req.headers['x-forwarded-protocol']);
  const scheme =
    forwardedProto && /^https?$/i.test(forwardedProto)
      ? forwardedProto.toLowerCase()
      : req.protocol;
  const forwardedHost = firstValue(req.headers['x-forwarded-host']);
  const host =
    forwardedHost && HOST.test(forwardedHost) ? forwardedHost : (req.headers.host ?? 'localhost');
  return `${scheme}://${host}`;
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
}
