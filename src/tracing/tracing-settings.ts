/** What tracing needs from the environment: the standard OpenTelemetry variables. */
export interface TracingSettings {
  /** Where spans go: the traces endpoint, or the base endpoint (the exporter adds /v1/traces). */
  endpoint: string;
  serviceName: string;
  /** Settings that were given but are not followed, for a warning at start-up. */
  ignored: string[];
}

/** The protocol the exporter speaks (OTLP over HTTP, JSON encoding). */
export const TRACE_PROTOCOL = 'http/json';

/**
 * Null (tracing off) unless OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT is
 * set; OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn it off as they do for any SDK.
 */
export function tracingSettingsOf(env: NodeJS.ProcessEnv): TracingSettings | null {
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (
    !endpoint ||
    env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true' ||
    env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() === 'none'
  ) {
    return null;
  }
  const ignored: string[] = [];
  for (const name of ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OTEL_EXPORTER_OTLP_PROTOCOL']) {
    const value = env[name]?.trim();
    if (value && value !== TRACE_PROTOCOL) {
      ignored.push(`${name}=${value} (svc sends ${TRACE_PROTOCOL})`);
    }
  }
  return { endpoint, serviceName: env.OTEL_SERVICE_NAME?.trim() || 'svc', ignored };
}
