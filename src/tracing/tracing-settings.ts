/** What tracing needs from the environment: the standard OpenTelemetry variables. */
export interface TracingSettings {
  /** Where spans go: the traces endpoint, or the base endpoint (the exporter adds /v1/traces). */
  endpoint: string;
  serviceName: string;
  /** How spans are encoded over OTLP/HTTP. */
  protocol: TraceProtocol;
  /** Settings that were given but are not followed, for a warning at start-up. */
  ignored: string[];
}

/** The protocols svc exports spans with: OTLP over HTTP, protobuf (the default) or JSON. */
export const TRACE_PROTOCOLS = ['http/protobuf', 'http/json'] as const;
export type TraceProtocol = (typeof TRACE_PROTOCOLS)[number];
/** OpenTelemetry's default protocol. */
export const DEFAULT_TRACE_PROTOCOL: TraceProtocol = 'http/protobuf';

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
  let protocol: TraceProtocol | null = null;
  // The traces variable wins over the general one, as in every SDK.
  for (const name of ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OTEL_EXPORTER_OTLP_PROTOCOL']) {
    const value = env[name]?.trim();
    if (!value) {
      continue;
    }
    if (!(TRACE_PROTOCOLS as readonly string[]).includes(value)) {
      ignored.push(`${name}=${value} (svc sends ${TRACE_PROTOCOLS.join(' or ')})`);
    } else {
      protocol ??= value as TraceProtocol;
    }
  }
  return {
    endpoint,
    serviceName: env.OTEL_SERVICE_NAME?.trim() || 'svc',
    protocol: protocol ?? DEFAULT_TRACE_PROTOCOL,
    ignored,
  };
}
