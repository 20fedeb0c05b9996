import { spawn } from 'node:child_process';
import { createServer, IncomingHttpHeaders, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Root } from 'protobufjs';
import { DataSource } from 'typeorm';
import { ADMIN_AUTHORIZATION, ADMIN_ENV } from '../support/admin-auth';
import { parseXml, postZip, request, REST, waitForResult } from '../support/rest-client';
import { ServiceProcess, spawnService, stopServices } from '../support/service-process';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  startTestService,
  TestDatabase,
  testEnvironment,
  TestService,
  waitFor,
} from '../support/test-service';
import { makeZip, zipEntries } from '../support/zip-fixtures';

const describeWithServer = SERVER_DATABASE_URL ? describe : describe.skip;

/** A script that reports the trace variables svc gives R. */
const TRACE_SCRIPT =
  'writeLines(c(Sys.getenv("TRACEPARENT"), Sys.getenv("SVC_TRACE_ID")), "trace.txt")\n';

/** The client's own span: its trace is the one the job must join. */
const CLIENT_TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN_ID = '00f067aa0ba902b7';
const CLIENT_TRACEPARENT = `00-${CLIENT_TRACE_ID}-${CLIENT_SPAN_ID}-01`;

interface ReceivedSpan {
  service: string;
  role: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  links: Array<{ traceId: string; spanId: string }>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
}
interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}
interface OtlpRequest {
  resourceSpans: Array<{
    resource: { attributes: OtlpAttribute[] };
    scopeSpans: Array<{
      spans: Array<{
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        attributes?: OtlpAttribute[];
        links?: Array<{ traceId: string; spanId: string }>;
      }>;
    }>;
  }>;
}

function attributesOf(list: OtlpAttribute[] = []): Record<string, unknown> {
  return Object.fromEntries(
    list.map(({ key, value }) => [
      key,
      value.stringValue ?? value.boolValue ?? value.doubleValue ?? Number(value.intValue),
    ]),
  );
}

/** The part of OTLP's trace schema (opentelemetry-proto, trace/v1) the receiver reads. */
const OTLP_TRACES = Root.fromJSON({
  nested: {
    ExportTraceServiceRequest: {
      fields: { resourceSpans: { rule: 'repeated', type: 'ResourceSpans', id: 1 } },
    },
    ResourceSpans: {
      fields: {
        resource: { type: 'Resource', id: 1 },
        scopeSpans: { rule: 'repeated', type: 'ScopeSpans', id: 2 },
      },
    },
    Resource: { fields: { attributes: { rule: 'repeated', type: 'KeyValue', id: 1 } } },
    ScopeSpans: { fields: { spans: { rule: 'repeated', type: 'Span', id: 2 } } },
    Span: {
      fields: {
        traceId: { type: 'bytes', id: 1 },
        spanId: { type: 'bytes', id: 2 },
        parentSpanId: { type: 'bytes', id: 4 },
        name: { type: 'string', id: 5 },
        kind: { type: 'int32', id: 6 },
        attributes: { rule: 'repeated', type: 'KeyValue', id: 9 },
        links: { rule: 'repeated', type: 'Link', id: 13 },
      },
    },
    Link: { fields: { traceId: { type: 'bytes', id: 1 }, spanId: { type: 'bytes', id: 2 } } },
    KeyValue: { fields: { key: { type: 'string', id: 1 }, value: { type: 'AnyValue', id: 2 } } },
    AnyValue: {
      fields: {
        stringValue: { type: 'string', id: 1 },
        boolValue: { type: 'bool', id: 2 },
        intValue: { type: 'int64', id: 3 },
        doubleValue: { type: 'double', id: 4 },
      },
    },
  },
}).lookupType('ExportTraceServiceRequest');

/** A protobuf export as its JSON encoding reads (ids as hex). */
function fromProtobuf(body: Buffer): OtlpRequest {
  return OTLP_TRACES.toObject(OTLP_TRACES.decode(body), {
    longs: String,
    arrays: true,
    // The JSON encoding's ids are hex, protobufjs gives base64.
    bytes: String,
  }) as OtlpRequest;
}

const hexOf = (base64: string | undefined): string =>
  Buffer.from(base64 ?? '', 'base64').toString('hex');

/**
 * An OTLP/HTTP receiver as a collector runs one: `POST /v1/traces` with the protobuf or the JSON
 * encoding, each span kept with its service's name and role.
 */
class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly contentTypes = new Set<string>();
  private server: Server | null = null;
  url = '';

  async start(): Promise<this> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        if (req.method !== 'POST' || req.url !== '/v1/traces') {
          res.statusCode = 404;
          res.end();
          return;
        }
        const type = String(req.headers['content-type']);
        this.contentTypes.add(type);
        const protobuf = type === 'application/x-protobuf';
        const raw = Buffer.concat(chunks);
        const body = protobuf
          ? fromProtobuf(raw)
          : (JSON.parse(raw.toString('utf8')) as OtlpRequest);
        const id = (value: string | undefined): string => (protobuf ? hexOf(value) : (value ?? ''));
        for (const resourceSpans of body.resourceSpans) {
          const resource = attributesOf(resourceSpans.resource.attributes);
          for (const scope of resourceSpans.scopeSpans) {
            for (const span of scope.spans) {
              this.spans.push({
                service: String(resource['service.name']),
                role: String(resource['svc.role']),
                traceId: id(span.traceId),
                spanId: id(span.spanId),
                parentSpanId: id(span.parentSpanId),
                name: span.name,
                kind: span.kind,
                attributes: attributesOf(span.attributes),
                links: (span.links ?? []).map((link) => ({
                  traceId: id(link.traceId),
                  spanId: id(link.spanId),
                })),
              });
            }
          }
        }
        res.setHeader('Content-Type', 'application/json');
        res.end('{}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.server = server;
    this.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }

  inTrace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((span) => span.traceId === traceId);
  }

  /** The one span of that name in the trace (fails the test when there is none or several). */
  one(traceId: string, name: string): ReceivedSpan {
    const found = this.inTrace(traceId).filter((span) => span.name === name);
    expect({ name, count: found.length }).toEqual({ name, count: 1 });
    return found[0];
  }
}

/** Records the callbacks it receives, with their headers. */
class CallbackReceiver {
  readonly deliveries: Array<{ headers: IncomingHttpHeaders }> = [];
  private server: Server | null = null;
  url = '';

  async start(): Promise<this> {
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        this.deliveries.push({ headers: req.headers });
        res.end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.server = server;
    this.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    return this;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}

/** The JSON log lines of a process's output. */
function logLines(output: string): Array<Record<string, unknown>> {
  return output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

// An API node and a worker need a shared database server: the embedded one is one process's.
describeWithServer('tracing: one trace from the request through the worker and back', () => {
  let database: TestDatabase;
  let collector: OtlpReceiver;
  let callbacks: CallbackReceiver;
  const nodes: ServiceProcess[] = [];

  beforeAll(async () => {
    collector = await new OtlpReceiver().start();
    callbacks = await new CallbackReceiver().start();
    database = await createTestDatabase();
    const env = testEnvironment(database, {
      ...ADMIN_ENV,
      LOG_LEVEL: 'info',
      LOG_FORMAT: 'json',
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_SERVICE_NAME: 'svc-under-test',
      // The JSON encoding here; the schedules' test below takes the default, protobuf.
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      // Batches leave every 100 ms, so the test does not wait for the default 5 s.
      OTEL_BSP_SCHEDULE_DELAY: '100',
      APPLICATION_SETTINGS: JSON.stringify({
        demo: { callbackHosts: ['127.0.0.1'], callbackSecret: 'callback-secret-for-tracing' },
      }),
    });
    nodes.push(await spawnService({ ...env, ROLE: 'api' }));
    nodes.push(await spawnService({ ...env, ROLE: 'worker', MIGRATIONS_RUN: 'false' }));
  });

  afterAll(async () => {
    await stopServices(nodes);
    await collector?.stop();
    await callbacks?.stop();
    await database?.drop();
  });

  it('a script job joins its submitter trace: request, claim, R run, result store, callback', async () => {
    const [api, worker] = nodes;
    const answer = await postZip(
      api.url,
      await makeZip([{ name: 'job.R', content: TRACE_SCRIPT }]),
      {
        traceparent: CLIENT_TRACEPARENT,
        'X-SVC-Callback-Url': callbacks.url,
      },
    );
    expect(answer.status).toBe(202);
    const token = parseXml(answer.text).jobToken;
    const result = parseXml((await waitForResult(token.resultUri)).text).result;
    expect(result.success).toBe('true');
    await waitFor(
      () => Promise.resolve(callbacks.deliveries.length > 0 || undefined),
      30000,
      'the callback',
    );
    const run = await waitFor(
      () =>
        Promise.resolve(
          collector.spans.find(
            (span) =>
              span.name === 'svc.callback.deliver' && span.attributes['svc.job.id'] === token.jobId,
          ),
        ),
      30000,
      'the callback span at the collector',
    );
    expect(collector.contentTypes).toEqual(new Set(['application/json']));

    // The whole job is in the client's trace.
    expect(run.traceId).toBe(CLIENT_TRACE_ID);
    const serverSpan = collector
      .inTrace(CLIENT_TRACE_ID)
      .find((span) => span.kind === 2 && span.parentSpanId === CLIENT_SPAN_ID);
    expect(serverSpan).toMatchObject({ role: 'api', service: 'svc-under-test' });
    const enqueue = collector.one(CLIENT_TRACE_ID, 'svc.job.enqueue');
    expect(enqueue).toMatchObject({
      role: 'api',
      attributes: {
        'svc.job.id': token.jobId,
        'svc.application': 'demo',
        'svc.job.source': 'rest',
      },
    });
    const insert = collector
      .inTrace(CLIENT_TRACE_ID)
      .filter((span) => span.parentSpanId === enqueue.spanId && span.role === 'api');
    expect(
      insert.map((span) => span.attributes['db.system.name'] ?? span.attributes['db.system']),
    ).toContain('postgresql');

    // On the worker: the run is a child of the submission, its steps children of the run.
    const jobRun = collector.one(CLIENT_TRACE_ID, 'svc.job.run');
    expect(jobRun).toMatchObject({
      role: 'worker',
      parentSpanId: enqueue.spanId,
      attributes: { 'svc.job.id': token.jobId, 'svc.job.attempt': 1, 'svc.result.success': true },
    });
    for (const step of [
      'svc.job.claim',
      'svc.job.prepare',
      'svc.r.run',
      'svc.job.pack_result',
      'svc.job.store_result',
    ]) {
      expect(collector.one(CLIENT_TRACE_ID, step)).toMatchObject({
        role: 'worker',
        parentSpanId: jobRun.spanId,
      });
    }
    const rRun = collector.one(CLIENT_TRACE_ID, 'svc.r.run');
    expect(rRun.attributes).toMatchObject({
      'svc.r.engine': 'native',
      'svc.r.outcome': 'succeeded',
    });
    const store = collector.one(CLIENT_TRACE_ID, 'svc.job.store_result');
    expect(
      collector.inTrace(CLIENT_TRACE_ID).some((span) => span.parentSpanId === store.spanId),
    ).toBe(true);

    // R was told its run's span: TRACEPARENT names the R run span, SVC_TRACE_ID the trace.
    const data = await request_(result.dataUri);
    const reported = (await zipEntries(data)).get('trace.txt')?.toString('utf8').split('\n');
    expect(reported?.slice(0, 2)).toEqual([
      `00-${CLIENT_TRACE_ID}-${rRun.spanId}-01`,
      CLIENT_TRACE_ID,
    ]);

    // The callback: a span of the trace, and its POST carries that span as the parent.
    const deliver = collector.one(CLIENT_TRACE_ID, 'svc.callback.deliver');
    expect(deliver).toMatchObject({
      parentSpanId: enqueue.spanId,
      kind: 3,
      attributes: { 'http.response.status_code': 200, 'server.address': '127.0.0.1' },
    });
    expect(callbacks.deliveries[0].headers.traceparent).toBe(
      `00-${CLIENT_TRACE_ID}-${deliver.spanId}-01`,
    );

    // The log lines of the job's run name its trace.
    const jobLines = logLines(worker.output()).filter((line) => line.jobId === token.jobId);
    expect(jobLines.length).toBeGreaterThan(0);
    expect(new Set(jobLines.map((line) => line.traceId))).toEqual(new Set([CLIENT_TRACE_ID]));
  });

  it('a /process call is one trace: the request, the function call, the R session', async () => {
    const [api] = nodes;
    const application = { 'X-SVC-Application-Name': 'traced' };
    const put = await request(`${api.url}${REST}/admin/catalog/R_FUNCTIONS/f.R`, {
      method: 'PUT',
      headers: { ...application, Authorization: ADMIN_AUTHORIZATION },
      body: 'svcJsonService <- function(payload) paste0("{\\"echo\\":", payload, "}")\n',
    });
    expect(put.status).toBe(201);
    const answer = await request(`${api.url}${REST}/process`, {
      method: 'POST',
      headers: { ...application, 'Content-Type': 'application/json' },
      body: '{"a":2}',
    });
    expect(answer.status).toBe(200);
    const session = await waitFor(
      () =>
        Promise.resolve(
          collector.spans.find((span) => span.name === 'svc.r.session.call' && span.role === 'api'),
        ),
      30000,
      'the R session span',
    );
    const call = collector.one(session.traceId, 'svc.function.call');
    expect(call.attributes).toMatchObject({
      'svc.application': 'traced',
      'svc.function': 'svcJsonService',
      'svc.function.outcome': 'succeeded',
    });
    expect(session.parentSpanId).toBe(call.spanId);
    // The call is a child of the request's span, which began the trace (its client sent none).
    const server = collector
      .inTrace(session.traceId)
      .find((span) => span.spanId === call.parentSpanId);
    expect(server).toMatchObject({ kind: 2, parentSpanId: '', role: 'api' });
    expect(server?.attributes['http.route']).toMatch(/process/);
  });
});

/** GET, the body as bytes. */
async function request_(url: string): Promise<Buffer> {
  const answer = await request(url);
  expect(answer.status).toBe(200);
  return answer.body;
}

describe('tracing off (no OTEL_EXPORTER_OTLP_ENDPOINT)', () => {
  let service: TestService;

  afterAll(async () => {
    await service?.stop();
  });

  it('loads no OpenTelemetry SDK module; with an endpoint, the SDK is loaded before the service', async () => {
    const dist = join(__dirname, '..', '..', 'dist', 'src');
    // The service's modules, loaded as main.ts loads them: the register module first.
    const script = `
      require(${JSON.stringify(join(dist, 'tracing', 'register.js'))});
      require(${JSON.stringify(join(dist, 'bootstrap.js'))});
      require('express'); require('pg');
      // The API package is prom-client's (it loads it whatever tracing is); the SDK is tracing's.
      const loaded = Object.keys(require.cache).filter(
        (f) => /[/]@opentelemetry[/](?!api[/])/.test(f) || f.endsWith('otel-tracing.js'));
      console.log(loaded.length);`;
    const loadedWith = async (env: NodeJS.ProcessEnv): Promise<number> => {
      const child = spawn(process.execPath, ['-e', script], {
        env,
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
      await new Promise((resolve) => child.once('close', resolve));
      return Number(out.trim());
    };
    const base = { ...process.env };
    delete base.OTEL_EXPORTER_OTLP_ENDPOINT;
    delete base.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
    expect(await loadedWith(base)).toBe(0);
    expect(
      await loadedWith({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' }),
    ).toBeGreaterThan(0);
  });

  it('stores no trace context with a job and gives R none, whatever the client sent', async () => {
    service = await startTestService();
    const answer = await postZip(
      service.url,
      await makeZip([{ name: 'job.R', content: TRACE_SCRIPT }]),
      {
        traceparent: CLIENT_TRACEPARENT,
      },
    );
    expect(answer.status).toBe(202);
    const token = parseXml(answer.text).jobToken;
    const result = parseXml((await waitForResult(token.resultUri)).text).result;
    expect(result.success).toBe('true');
    const reported = (await zipEntries(await request_(result.dataUri))).get('trace.txt');
    expect(reported?.toString('utf8')).toBe('\n\n');
    const rows = await service.app
      .get(DataSource)
      .query<Array<{ traceparent: string | null; tracestate: string | null }>>(
        'SELECT traceparent, tracestate FROM job WHERE id = $1',
        [token.jobId],
      );
    expect(rows).toEqual([{ traceparent: null, tracestate: null }]);
  });
});

describe("tracing: a schedule's runs (timer-driven work) start traces of their own", () => {
  let database: TestDatabase;
  let collector: OtlpReceiver;
  let node: ServiceProcess;

  beforeAll(async () => {
    collector = await new OtlpReceiver().start();
    database = await createTestDatabase();
    node = await spawnService(
      testEnvironment(database, {
        ...ADMIN_ENV,
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
        OTEL_SERVICE_NAME: 'svc-schedules',
        OTEL_BSP_SCHEDULE_DELAY: '100',
      }),
    );
  });

  afterAll(async () => {
    await stopServices(node ? [node] : []);
    await collector?.stop();
    await database?.drop();
  });

  it('each run is a new trace linked to the request that made the schedule, exported as protobuf', async () => {
    const app = { 'X-SVC-Application-Name': 'ticking', Authorization: ADMIN_AUTHORIZATION };
    const script = await request(`${node.url}${REST}/admin/catalog/R_SCRIPTS/tick.R`, {
      method: 'PUT',
      headers: app,
      body: 'cat(1)\n',
    });
    expect(script.status).toBe(201);
    const made = await request(`${node.url}${REST}/admin/schedules`, {
      method: 'POST',
      headers: {
        ...app,
        'Content-Type': 'application/json',
        Accept: 'application/json',
        traceparent: CLIENT_TRACEPARENT,
      },
      body: JSON.stringify({ name: 'tick', cron: '* * * * * *', job: { rScript: 'tick.R' } }),
    });
    expect(made.status).toBe(201);
    const { id } = JSON.parse(made.text) as { id: string };
    const runs = await waitFor(
      () => {
        const found = collector.spans.filter(
          (span) => span.name === 'svc.schedule.run' && span.attributes['svc.schedule.id'] === id,
        );
        return Promise.resolve(found.length >= 2 ? found : undefined);
      },
      30000,
      'two runs at the collector',
    );
    expect(collector.contentTypes).toEqual(new Set(['application/x-protobuf']));
    // The request that made the schedule is in the client's trace; its span is what runs link to.
    const requestSpans = collector.inTrace(CLIENT_TRACE_ID);
    expect(requestSpans.length).toBeGreaterThan(0);
    for (const run of runs) {
      expect(run.traceId).not.toBe(CLIENT_TRACE_ID);
      expect(run.parentSpanId).toBe('');
      expect(run.links).toHaveLength(1);
      expect(run.links[0].traceId).toBe(CLIENT_TRACE_ID);
      expect(requestSpans.map((span) => span.spanId)).toContain(run.links[0].spanId);
      // The run's job is stored in the run's trace.
      expect(
        collector
          .inTrace(run.traceId)
          .some((span) => span.name === 'svc.job.enqueue' && span.parentSpanId === run.spanId),
      ).toBe(true);
    }
    expect(new Set(runs.map((run) => run.traceId)).size).toBe(runs.length);
    // The request's trace does not grow with the runs: no job of the schedule is in it.
    expect(requestSpans.filter((span) => span.name.startsWith('svc.job'))).toEqual([]);
  });

  it('takes a schedule whose request brings an over-long tracestate: 201, not a database error', async () => {
    const app = { 'X-SVC-Application-Name': 'ticking', Authorization: ADMIN_AUTHORIZATION };
    // 32 members of 250 characters: what the W3C format allows, far over the 512 kept.
    const tracestate = Array.from({ length: 32 }, (_, i) => `k${i}=${'v'.repeat(250)}`).join(',');
    const made = await request(`${node.url}${REST}/admin/schedules`, {
      method: 'POST',
      headers: {
        ...app,
        'Content-Type': 'application/json',
        Accept: 'application/json',
        traceparent: CLIENT_TRACEPARENT,
        tracestate,
      },
      body: JSON.stringify({ name: 'long-state', cron: '0 0 3 * * *', job: { rScript: 'tick.R' } }),
    });
    expect(made.status).toBe(201);
    const { id } = JSON.parse(made.text) as { id: string };
    const gone = await request(`${node.url}${REST}/admin/schedules/${id}`, {
      method: 'DELETE',
      headers: app,
    });
    expect(gone.status).toBe(204);
  });
});
