import { findRscript } from '../../src/r-engine/native-r.engine';
import { RSessionPool } from '../../src/r-engine/r-session-pool';
import type { FunctionLibrary } from '../../src/r-engine/function-library';

const rscript = findRscript({ rHome: null, rscriptPath: null, rMemoryLimitMb: 0 });
const describeNative = rscript ? describe : describe.skip;

const library: FunctionLibrary = {
  id: 1,
  files: [
    { name: 'f.R', content: 'svcJsonService <- function(payload) paste0("echo:", payload)\n' },
  ],
};

const quitting: FunctionLibrary = {
  id: 2,
  files: [{ name: 'q.R', content: 'svcJsonService <- function(payload) quit(status = 3)\n' }],
};

describeNative('RSessionPool (native R)', () => {
  let pool: RSessionPool;

  beforeAll(async () => {
    pool = new RSessionPool(
      {
        rscript: rscript ?? 'Rscript',
        rHome: null,
        rMemoryLimitMb: 0,
        functionSessions: 1,
        functionSessionMaxCalls: 3,
      },
      { get: (app) => Promise.resolve(app === 'quits' ? quitting : library) },
    );
    await pool.start();
  });
  afterAll(async () => {
    await pool.stop();
    expect(pool.stats().size).toBe(0);
  });

  const call = (payload: string) =>
    pool.callFunction({
      applicationName: 'app',
      functionName: 'svcJsonService',
      payload,
      timeoutMs: 10_000,
    });

  it('replaces a session after FUNCTION_SESSION_MAX_CALLS calls', async () => {
    const [first] = pool.pids();
    for (let i = 0; i < 3; i++) {
      await expect(call(`${i}`)).resolves.toEqual({ status: 'succeeded', value: `echo:${i}` });
    }
    await expect(call('next')).resolves.toEqual({ status: 'succeeded', value: 'echo:next' });
    expect(pool.pids()).not.toContain(first);
  });

  it('runs a call again elsewhere when its session died without reading it', async () => {
    const [pid] = pool.pids();
    // Stopped, R cannot read the request; killed, it leaves it unread: the connection is reset.
    process.kill(pid, 'SIGSTOP');
    const answer = call('retried');
    await new Promise((resolve) => setTimeout(resolve, 200));
    process.kill(-pid, 'SIGKILL');
    await expect(answer).resolves.toEqual({ status: 'succeeded', value: 'echo:retried' });
    expect(pool.pids()).not.toContain(pid);
  });

  it('fails a call as session-died when R dies while running it, and goes on', async () => {
    const answer = await pool.callFunction({
      applicationName: 'quits',
      functionName: 'svcJsonService',
      payload: '',
      timeoutMs: 10_000,
    });
    expect(answer).toMatchObject({ status: 'failed', reason: 'session-died' });
    expect((answer as { message: string }).message).toMatch(/R exited with status 3/);
    await expect(call('after')).resolves.toEqual({ status: 'succeeded', value: 'echo:after' });
  });
});
