import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/app-config';
import type { FunctionLibrary } from '../../src/r-engine/function-library';
import { findRscript, type NativeRConfig } from '../../src/r-engine/launch/r-location';
import { NativeREngine } from '../../src/r-engine/native/native-r.engine';
import type { REngine } from '../../src/r-engine/r-engine';
import { WebREngine } from '../../src/r-engine/webr/webr.engine';

/**
 * What the service gives R code (r/svc-env.R) is the same on every engine: a script job, forked
 * or spawned on native R or on webR, and a function call, in a warm session or on webR, see one
 * environment named svc on the search path holding svc_progress alone; a script runs in the
 * global environment, empty when it starts.
 */
const PROBE = `c(
  paste(ls("svc", all.names = TRUE), collapse = ","),
  as.character(sum(search() == "svc")),
  as.character(is.function(get("svc_progress", pos = "svc")))
)`;
const SCRIPT = `writeLines(c(${PROBE},
  environmentName(environment()),
  paste(ls(globalenv(), all.names = TRUE), collapse = ",")), "seen.txt")\n`;
const FUNCTION = `svcJsonService <- function(payload) paste(${PROBE}, collapse = "|")\n`;

const SCRIPT_SEES = ['svc_progress', '1', 'TRUE', 'R_GlobalEnv', ''];
const FUNCTION_SEES = 'svc_progress|1|TRUE';

const library: FunctionLibrary = {
  id: 1,
  packages: 0,
  files: [{ name: 'f.R', content: FUNCTION }],
};

const native = (mode: 'fork' | 'spawn'): NativeRConfig => ({
  rSandbox: 'none',
  rHome: null,
  rscriptPath: null,
  rMemoryLimitMb: 0,
  rScriptMode: mode,
});
const engines: Array<[string, () => REngine]> = [['webR', () => new WebREngine({})]];
if (findRscript(native('fork'))) {
  engines.push(['native R, fork', () => new NativeREngine(native('fork'))]);
  engines.push(['native R, spawn', () => new NativeREngine(native('spawn'))]);
}

describe.each(engines)('the svc environment on %s', (_name, make) => {
  const engine = make();
  let root: string;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'svc-environment-spec-'));
    await engine.start();
  });
  afterAll(async () => {
    await engine.stop();
    await rm(root, { recursive: true, force: true });
  });

  it('a script sees svc with svc_progress alone, from the empty global environment, every run', async () => {
    for (const run of [1, 2]) {
      const workDir = await mkdtemp(join(root, `run${run}-`));
      await writeFile(join(workDir, 'script.R'), `${SCRIPT}left_behind <- TRUE\n`);
      const outcome = await engine.runScript({
        jobId: `svc-env-${run}`,
        workDir,
        scriptName: 'script.R',
        timeoutMs: 60_000,
      });
      expect(outcome.status).toBe('succeeded');
      expect((await readFile(join(workDir, 'seen.txt'), 'utf8')).split('\n')).toEqual([
        ...SCRIPT_SEES,
        '',
      ]);
    }
  });

  it('a function sees the same svc', async () => {
    const calls = engine.functionCalls(loadConfig({ FUNCTION_SESSIONS: '1' }), {
      get: () => Promise.resolve(library),
    });
    // webR serves calls itself (started already); native R's pool of sessions is its own.
    const pool = engine instanceof WebREngine ? null : calls;
    await pool?.start();
    try {
      await expect(
        calls.callFunction({
          applicationName: 'app',
          functionName: 'svcJsonService',
          payload: '{}',
          timeoutMs: 60_000,
        }),
      ).resolves.toEqual({ status: 'succeeded', value: FUNCTION_SEES });
    } finally {
      await pool?.stop();
    }
  });
});
