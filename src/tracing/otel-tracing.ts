/**
 * The OpenTelemetry SDK behind tracing.ts, loaded by register.ts only when tracing is on: spans
 * are batched and exported as OTLP over HTTP (protobuf, or JSON: OTEL_EXPORTER_OTLP_PROTOCOL) to OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT; the
 * HTTP server, Express and pg are instrumented; W3C trace context is read from requests.
 */
import { hostname } from 'node:os';
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import {
  type Context,
  context,
  type DiagLogger,
  diag,
  DiagLogLevel,
  type Link,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { ExpressInstrumentation, ExpressLayerType } from '@opentelemetry/instrumentation-express';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import {
  defaultResource,
  detectResources,
  envDetector,
  resourceFromAttributes,
} from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { setTraceLogFields } from '../common/log-context';
import { maskedQuery } from '../common/log-redaction';
import { installTracing, type SpanNotes, type TraceCarrier, type Tracing } from './tracing';
import type { TracingSettings } from './tracing-settings';

/** Requests that are polled (probes, scrapes): a span each would bury the requests that matter. */
const POLLED_PATH = /^\/(?:metrics|svc\/api\/rest\/system\/health\/[a-z]+)\/?(?:\?|$)/;

/** The same exporter complaint (a collector that is down) is logged at most this often. */
const DIAGNOSTIC_REPEAT_MS = 60_000;

/** The parent context a span option names: a stored trace context, a new trace, or the active one. */
function contextOf(parent: TraceCarrier | null | undefined): Context {
  if (parent === undefined) {
    return context.active();
  }
  if (parent === null) {
    return ROOT_CONTEXT;
  }
  const headers: Record<string, string> = { traceparent: parent.traceparent };
  if (parent.tracestate) {
    headers.tracestate = parent.tracestate;
  }
  // An unreadable traceparent extracts nothing: the span begins a new trace.
  return propagation.extract(ROOT_CONTEXT, headers);
}

/** The links of a span: the span contexts of stored trace contexts (unreadable ones left out). */
function linksOf(carriers: TraceCarrier[] | undefined): Link[] {
  return (carriers ?? []).flatMap((carrier) => {
    const linked = trace.getSpanContext(contextOf(carrier));
    return linked && trace.isSpanContextValid(linked) ? [{ context: linked }] : [];
  });
}

function notesOf(span: Span): SpanNotes {
  return {
    set: (attributes) => span.setAttributes(attributes),
    fail: (reason) => span.setStatus({ code: SpanStatusCode.ERROR, message: reason }),
  };
}

/** The query of a request's span with the values of credential-like parameters masked. */
function incomingSpanAttributes(request: IncomingMessage): Record<string, string> {
  const url = request.url ?? '';
  const question = url.indexOf('?');
  return question < 0 ? {} : { 'url.query': maskedQuery(url.slice(question + 1)) };
}

/**
 * Exporter and instrumentation complaints, to the service's log once it exists (until then,
 * dropped), each message at most once a minute.
 */
class DiagnosticsToLog implements DiagLogger {
  sink: ((message: string) => void) | null = null;
  private readonly lastSent = new Map<string, number>();

  private send(message: string, args: unknown[]): void {
    const text = [message, ...args.map((arg) => (arg instanceof Error ? arg.message : String(arg)))]
      .join(' ')
      .slice(0, 500);
    const now = Date.now();
    if (!this.sink || now - (this.lastSent.get(text) ?? -Infinity) < DIAGNOSTIC_REPEAT_MS) {
      return;
    }
    this.lastSent.set(text, now);
    this.sink(`tracing: ${text}`);
  }

  error = (message: string, ...args: unknown[]): void => this.send(message, args);
  warn = (message: string, ...args: unknown[]): void => this.send(message, args);
  info = (): void => undefined;
  debug = (): void => undefined;
  verbose = (): void => undefined;
}

const diagnostics = new DiagnosticsToLog();

/** Starts the SDK (before Express and pg are loaded) and installs it behind tracing.ts. */
export function startTracing(settings: TracingSettings): void {
  diag.setLogger(diagnostics, DiagLogLevel.WARN);
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (envDetector) win over svc's defaults.
  const resource = defaultResource()
    .merge(
      resourceFromAttributes({
        'service.name': settings.serviceName,
        'service.instance.id': `${hostname()}:${process.pid}`,
        'svc.role': process.env.ROLE?.trim() || 'all',
      }),
    )
    .merge(detectResources({ detectors: [envDetector] }));
  // The exporter reads the endpoint, headers and timeout from the OTEL_EXPORTER_OTLP_* variables,
  // the processor its batching from OTEL_BSP_*, the provider its sampler from OTEL_TRACES_SAMPLER.
  const provider = new NodeTracerProvider({
    resource,
    spanProcessors: [
      new BatchSpanProcessor(
        settings.protocol === 'http/json' ? new OtlpJsonExporter() : new OtlpProtobufExporter(),
      ),
    ],
  });
  provider.register();
  registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      new HttpInstrumentation({
        ignoreIncomingRequestHook: (request) => POLLED_PATH.test(request.url ?? ''),
        // A request that carries its own trace context was sent inside its own client span (a
        // callback's POST, svc.callback.deliver): a second span would repeat it, and its
        // traceparent would replace the one the receiver is meant to see.
        ignoreOutgoingRequestHook: (request) => hasTraceparent(request.headers),
        startIncomingSpanHook: incomingSpanAttributes,
      }),
      // Only for the route in the request's span ("POST /svc/api/rest/jobs"): a span per
      // Express layer (Nest's middlewares, its router, the handler) would repeat the request's.
      new ExpressInstrumentation({
        ignoreLayersType: [
          ExpressLayerType.MIDDLEWARE,
          ExpressLayerType.ROUTER,
          ExpressLayerType.REQUEST_HANDLER,
        ],
      }),
      // Statements outside a request or job (polls, heartbeats, LISTEN) start no trace; taking a
      // pooled connection is no step of its own.
      new PgInstrumentation({ requireParentSpan: true, ignoreConnectSpans: true }),
    ],
  });
  const tracer = provider.getTracer('svc');
  setTraceLogFields(() => {
    const span = trace.getActiveSpan()?.spanContext();
    return span && trace.isSpanContextValid(span)
      ? { traceId: span.traceId, spanId: span.spanId }
      : undefined;
  });
  const tracing: Tracing = {
    inSpan: (name, options, fn) =>
      tracer.startActiveSpan(
        name,
        {
          kind: options.kind === 'client' ? SpanKind.CLIENT : SpanKind.INTERNAL,
          attributes: options.attributes,
          startTime: options.startTime,
          links: linksOf(options.links),
        },
        contextOf(options.parent),
        async (span) => {
          try {
            return await fn(notesOf(span));
          } catch (error) {
            // The kind of failure only: a message may quote a job's data.
            const type = error instanceof Error ? error.name : typeof error;
            span.setAttribute('error.type', type);
            span.setStatus({ code: SpanStatusCode.ERROR, message: type });
            throw error;
          } finally {
            span.end();
          }
        },
      ),
    record: (name, options) => {
      tracer
        .startSpan(
          name,
          { attributes: options.attributes, startTime: options.startTime },
          contextOf(options.parent),
        )
        .end();
    },
    activeCarrier: () => {
      if (!trace.getActiveSpan()) {
        return null;
      }
      const headers: Record<string, string> = {};
      propagation.inject(context.active(), headers);
      return headers.traceparent
        ? { traceparent: headers.traceparent, tracestate: headers.tracestate ?? null }
        : null;
    },
    flush: () => provider.forceFlush(),
    describe: () =>
      `exporting spans to ${settings.endpoint} (OTLP ${settings.protocol}) as service ${String(
        resource.attributes['service.name'],
      )}`,
    connectLog: (warn) => {
      diagnostics.sink = warn;
      for (const ignored of settings.ignored) {
        warn(`tracing: ${ignored} is not followed`);
      }
    },
  };
  installTracing(tracing);
}

function hasTraceparent(headers: OutgoingHttpHeaders | readonly string[] | undefined): boolean {
  if (headers === undefined || Array.isArray(headers)) {
    return false;
  }
  return Object.keys(headers).some((name) => name.toLowerCase() === 'traceparent');
}
