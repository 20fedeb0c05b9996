/**
 * The service's tracing as the rest of the code sees it: spans around the steps of a request or
 * a job, the trace context stored with a job, the variables that give R its run's trace.
 *
 * Tracing is off unless OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) is set: then every
 * function here is a plain call (one null check), no OpenTelemetry module is loaded, and a job
 * stores no trace context. When it is set, register.ts (the first import of main.ts) loads the
 * SDK and installs it here (otel-tracing.ts), before Express and pg are loaded.
 */

/** A span's W3C trace context, as the `traceparent` and `tracestate` headers carry it. */
export interface TraceCarrier {
  traceparent: string;
  tracestate: string | null;
}

/** Span attributes: ids, names, counts, outcomes; never secrets or payloads. */
export type SpanAttributes = Record<string, string | number | boolean>;

/** What the code inside a span may add to it. */
export interface SpanNotes {
  set(attributes: SpanAttributes): void;
  /** Marks the span failed with a short reason (an outcome, not an exception). */
  fail(reason: string): void;
}

export interface SpanOptions {
  attributes?: SpanAttributes;
  /**
   * The span's parent: a stored trace context (a job's), or null for a new trace. Absent: the
   * active span (the request's, the job's).
   */
  parent?: TraceCarrier | null;
  /**
   * Spans of other traces this one follows from (a schedule's run links to the request that made
   * the schedule); an unreadable context is left out.
   */
  links?: TraceCarrier[];
  /** `client` for a request the service sends. */
  kind?: 'internal' | 'client';
  /** When the span began (epoch milliseconds), for a step measured before its span could exist. */
  startTime?: number;
}

/** The tracing SDK behind this module (otel-tracing.ts). */
export interface Tracing {
  inSpan<T>(name: string, options: SpanOptions, fn: (span: SpanNotes) => Promise<T>): Promise<T>;
  /** A span that ends now; begun at `options.startTime`. */
  record(name: string, options: SpanOptions): void;
  /** The active span's context, or null outside of any span. */
  activeCarrier(): TraceCarrier | null;
  /** Exports the spans not yet sent; at shutdown. */
  flush(): Promise<void>;
  /** Where spans go, for the start-up log. */
  describe(): string;
  /** Sends the SDK's complaints (an unreachable collector) to the service's log. */
  connectLog(warn: (message: string) => void): void;
}

let installed: Tracing | null = null;

const NO_NOTES: SpanNotes = { set: () => undefined, fail: () => undefined };

/** Called once, by register.ts, when tracing is on. */
export function installTracing(tracing: Tracing): void {
  installed = tracing;
}

export function tracingEnabled(): boolean {
  return installed !== null;
}

/** Runs `fn` in a new span (a child of `options.parent`, else of the active span); off: just runs it. */
export function inSpan<T>(
  name: string,
  options: SpanOptions,
  fn: (span: SpanNotes) => Promise<T>,
): Promise<T> {
  return installed ? installed.inSpan(name, options, fn) : fn(NO_NOTES);
}

/** Records a span that began at `options.startTime` and ends now. */
export function recordSpan(name: string, options: SpanOptions): void {
  installed?.record(name, options);
}

/** The active span's trace context (stored with a job, sent with a request); null when off. */
export function activeTraceCarrier(): TraceCarrier | null {
  return installed ? installed.activeCarrier() : null;
}

/**
 * Connects tracing to the service's log once it exists; returns the line that says where spans
 * go, or null when tracing is off.
 */
export function connectTracingLog(warn: (message: string) => void): string | null {
  installed?.connectLog(warn);
  return installed ? installed.describe() : null;
}

/** Sends the spans not yet exported (before the process exits). */
export function flushTracing(): Promise<void> {
  return installed ? installed.flush() : Promise.resolve();
}

/** The trace id in a `traceparent` (`00-<trace id>-<span id>-<flags>`). */
export function traceIdOf(traceparent: string): string {
  return traceparent.split('-')[1] ?? '';
}

/**
 * Variables that tell R the trace of its run, so an analyst's own logging can name it:
 * TRACEPARENT and TRACESTATE as OpenTelemetry's environment carriers, SVC_TRACE_ID plain.
 */
export function traceEnvironment(carrier: TraceCarrier | null): Record<string, string> {
  if (!carrier) {
    return {};
  }
  return {
    TRACEPARENT: carrier.traceparent,
    SVC_TRACE_ID: traceIdOf(carrier.traceparent),
    ...(carrier.tracestate ? { TRACESTATE: carrier.tracestate } : {}),
  };
}
