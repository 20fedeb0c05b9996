import { tracingSettingsOf } from './tracing-settings';
import { traceEnvironment, traceIdOf } from './tracing';

describe('tracingSettingsOf', () => {
  it('is off without an endpoint', () => {
    expect(tracingSettingsOf({})).toBeNull();
    expect(
      tracingSettingsOf({ OTEL_SERVICE_NAME: 'svc-a', OTEL_EXPORTER_OTLP_ENDPOINT: '' }),
    ).toBeNull();
  });

  it('is on with either endpoint; the traces endpoint wins; the service is svc unless named', () => {
    expect(tracingSettingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toEqual({
      endpoint: 'http://c:4318',
      serviceName: 'svc',
      protocol: 'http/protobuf',
      ignored: [],
    });
    expect(
      tracingSettingsOf({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:4318/v1/traces',
        OTEL_SERVICE_NAME: 'reports',
      }),
    ).toMatchObject({ endpoint: 'http://t:4318/v1/traces', serviceName: 'reports' });
  });

  it('is off when the SDK or the trace exporter is switched off', () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
    expect(tracingSettingsOf({ ...endpoint, OTEL_SDK_DISABLED: 'TRUE' })).toBeNull();
    expect(tracingSettingsOf({ ...endpoint, OTEL_TRACES_EXPORTER: 'none' })).toBeNull();
    expect(tracingSettingsOf({ ...endpoint, OTEL_SDK_DISABLED: 'false' })).not.toBeNull();
  });

  it('sends http/protobuf unless http/json is asked for; names a protocol it does not speak', () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
    expect(tracingSettingsOf({ ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toMatchObject({
      protocol: 'http/protobuf',
      ignored: ['OTEL_EXPORTER_OTLP_PROTOCOL=grpc (svc sends http/protobuf or http/json)'],
    });
    expect(
      tracingSettingsOf({ ...endpoint, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' }),
    ).toMatchObject({ protocol: 'http/json', ignored: [] });
    expect(
      tracingSettingsOf({
        ...endpoint,
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      })?.protocol,
    ).toBe('http/protobuf');
  });
});

describe('traceEnvironment', () => {
  const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

  it("gives R the run's traceparent, its trace id and a tracestate when there is one", () => {
    expect(traceIdOf(traceparent)).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(traceEnvironment({ traceparent, tracestate: null })).toEqual({
      TRACEPARENT: traceparent,
      SVC_TRACE_ID: '4bf92f3577b34da6a3ce929d0e0e4736',
    });
    expect(traceEnvironment({ traceparent, tracestate: 'vendor=1' })).toMatchObject({
      TRACESTATE: 'vendor=1',
    });
  });

  it('gives nothing without a trace', () => {
    expect(traceEnvironment(null)).toEqual({});
  });
});
