import { plainSecretsEqual } from '../common/secret-hash';
import type { AdminConfig } from '../config/config-slices';

/**
 * Whether a scrape may read /metrics (METRICS_ACCESS, docs/security.md): null when it may, else
 * why not. The metrics name every application with its counts, so by default only a holder of
 * METRICS_TOKEN reads them; none set, nobody does until one is (or METRICS_ACCESS=open).
 */
export function metricsRefusal(
  config: Pick<AdminConfig, 'metricsAccess' | 'metricsToken'>,
  authorization: string | undefined,
): string | null {
  if (config.metricsAccess === 'open') {
    return null;
  }
  if (config.metricsToken === null) {
    return 'The metrics are not open: set METRICS_TOKEN and scrape with it as a bearer token, or METRICS_ACCESS=open.';
  }
  const token = /^\s*bearer\s+(\S+)\s*$/i.exec(authorization ?? '')?.[1];
  return token !== undefined && plainSecretsEqual(token, config.metricsToken)
    ? null
    : 'The metrics need METRICS_TOKEN as a bearer token (Authorization: Bearer <token>).';
}

/** The challenge a refused scrape gets with its 401. */
export const METRICS_CHALLENGE = 'Bearer realm="metrics"';
