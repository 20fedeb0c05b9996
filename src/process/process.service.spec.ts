import { ApiError } from '../common/api-error';
import type { EnvironmentRuntime } from '../environments/environment-runtime';
import { loadConfig } from '../config/app-config';
import { configView } from '../config/config-slice';
import { ProcessConfig } from '../config/config-slices';
import type {
  FunctionCallEngine,
  FunctionCallOutcome,
  FunctionCallRequest,
} from '../r-engine/function-call-engine';
import { REngineUnavailableError } from '../r-engine/r-engine';
import { ProcessService } from './process.service';

/** An engine whose calls finish when the test says so. */
class HeldEngine implements FunctionCallEngine {
  readonly calls: Array<{
    request: FunctionCallRequest;
    finish: (o: FunctionCallOutcome) => void;
  }> = [];
  start = (): Promise<void> => Promise.resolve();
  stop = (): Promise<void> => Promise.resolve();
  stats = () => ({ size: 1, busy: this.calls.length, idle: 0, waiting: 0 });
  callFunction(request: FunctionCallRequest): Promise<FunctionCallOutcome> {
    return new Promise((finish) => this.calls.push({ request, finish }));
  }
}

function service(engine: FunctionCallEngine, maxConcurrent = 1, maxQueued = 1): ProcessService {
  const config = loadConfig({
    FUNCTION_TIMEOUT_SECONDS: '7',
    PROCESS_MAX_CONCURRENT: String(maxConcurrent),
    PROCESS_MAX_QUEUED: String(maxQueued),
  });
  return new ProcessService(configView(config, ProcessConfig.keys), engine, NO_ENVIRONMENTS);
}

/** The environments' runtime (a database and R of its own) replaced: no application has one. */
const NO_ENVIRONMENTS = {
  forJob: () => Promise.resolve(null),
} as unknown as EnvironmentRuntime;

const flush = () => new Promise((resolve) => setImmediate(resolve));

describe('ProcessService', () => {
  it('passes the call on as urgent, with the function of its kind and the time limit', async () => {
    const engine = new HeldEngine();
    const answer = service(engine).call('demo', 'json', '{}');
    await flush();
    expect(engine.calls[0].request).toMatchObject({
      applicationName: 'demo',
      functionName: 'svcJsonService',
      payload: '{}',
      timeoutMs: 7000,
      urgent: true,
    });
    engine.calls[0].finish({ status: 'succeeded', value: '[1]' });
    await expect(answer).resolves.toEqual({
      status: 200,
      contentType: 'application/json; charset=utf-8',
      body: '[1]',
    });
  });

  it('a failed call is a 400 with the error document of its kind', async () => {
    const engine = new HeldEngine();
    const answer = service(engine).call('demo', 'xml', '<a/>');
    await flush();
    engine.calls[0].finish({ status: 'failed', reason: 'r-error', message: 'a < b' });
    const { status, contentType, body } = await answer;
    expect(status).toBe(400);
    expect(contentType).toMatch(/^application\/xml/);
    expect(body).toMatch(/<errorResult [^>]*applicationName="demo"/);
    expect(body).toContain('<errorMessage>a &lt; b</errorMessage>');
  });

  it('runs maxConcurrent calls, queues maxQueued, refuses the rest with 503 and Retry-After', async () => {
    const engine = new HeldEngine();
    const process = service(engine, 2, 1);
    const running = [process.call('a', 'json', '1'), process.call('a', 'json', '2')];
    const queued = process.call('a', 'json', '3');
    await flush();
    expect(engine.calls.map((c) => c.request.payload)).toEqual(['1', '2']);
    expect(process.stats()).toEqual({ running: 2, queued: 1 });
    const refused = process.call('a', 'json', '4');
    await expect(refused).rejects.toBeInstanceOf(ApiError);
    await expect(refused).rejects.toMatchObject({ headers: { 'Retry-After': '1' } });
    expect(((await refused.catch((error: unknown) => error)) as ApiError).getStatus()).toBe(503);
    engine.calls[0].finish({ status: 'succeeded', value: 'one' });
    await running[0];
    await flush();
    // The freed slot went to the queued call, in order.
    expect(engine.calls.map((c) => c.request.payload)).toEqual(['1', '2', '3']);
    expect(process.stats()).toEqual({ running: 2, queued: 0 });
    engine.calls[1].finish({ status: 'succeeded', value: 'two' });
    engine.calls[2].finish({ status: 'succeeded', value: 'three' });
    await expect(queued).resolves.toMatchObject({ body: 'three' });
    await running[1];
    expect(process.stats()).toEqual({ running: 0, queued: 0 });
  });

  it('an unreachable R is a 503, and frees the slot', async () => {
    const engine = new HeldEngine();
    engine.callFunction = () => Promise.reject(new REngineUnavailableError('no R session'));
    const process = service(engine);
    const error = await process.call('a', 'json', '1').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).getStatus()).toBe(503);
    expect(process.stats()).toEqual({ running: 0, queued: 0 });
  });
});
