import { dirname } from 'node:path';
import type { WebR } from 'webr';
import {
  type FunctionCallFailure,
  type FunctionCallOutcome,
  R_REPORTED_FAILURES,
} from '../function-call-engine';

/**
 * webR is an optional dependency (about 180 MB with what it brings): loaded on first use only, so
 * an install without it (`npm ci --omit=optional`, the Docker image) runs native R. It loads
 * R.wasm and its worker script from the package's own `dist/` directory (a file path works as
 * the base URL under Node); the package's "require" export is `dist/webr.cjs`.
 */
export async function loadWebR(): Promise<{ WebR: typeof WebR; baseUrl: string }> {
  let module: typeof import('webr');
  try {
    module = await import('webr');
  } catch (error) {
    throw new Error(
      `the optional package webr is not installed (${messageOf(error).split('\n')[0]}): install R (apt-get install r-base-core) or run npm install webr`,
    );
  }
  return { WebR: module.WebR, baseUrl: dirname(require.resolve('webr')) + '/' };
}

/**
 * Run once in each instance's worker, before any job: webR under Node.js runs R's JavaScript
 * bridge in a worker thread with the whole Node.js API, so without this a job's R code reaches
 * the service's environment (`webr::eval_js("process.env")`), its files (`webr::mount` of
 * NODEFS, `process.getBuiltinModule("fs")`) and processes. It takes away mounting, the Node.js
 * process object's dangerous parts, the network classes, and code from strings (eval and the
 * Function constructors: `webr::eval_js` and Emscripten's run_script then fail).
 */
export const WORKER_HARDENING = `(() => {
  const refuse = (what) => function () { throw new Error(what + ' is not available to jobs'); };
  const fs = globalThis.FS || (globalThis.Module && globalThis.Module.FS);
  if (!fs) throw new Error('webR worker without FS');
  fs.mount = refuse('mounting a file system');
  const p = globalThis.process;
  if (p) {
    try { Object.defineProperty(p, 'env', { value: {}, writable: false, configurable: false }); } catch (e) { p.env = {}; }
    for (const name of ['getBuiltinModule', 'binding', '_linkedBinding', 'dlopen', 'kill', '_kill',
        'abort', 'reallyExit', 'chdir', 'setuid', 'setgid', 'seteuid', 'setegid', 'setgroups',
        'initgroups', 'umask', 'cwd', 'memoryUsage', 'cpuUsage', 'resourceUsage', 'report',
        'openStdin', '_rawDebug', 'setSourceMapsEnabled']) {
      try { Object.defineProperty(p, name, { value: refuse('process.' + name), writable: false, configurable: false }); } catch (e) { /* absent */ }
    }
  }
  for (const name of ['Worker', 'SharedWorker', 'fetch', 'WebSocket', 'XMLHttpRequest',
      'EventSource', 'importScripts', 'require']) {
    try { Object.defineProperty(globalThis, name, { value: undefined, writable: false, configurable: false }); } catch (e) { /* absent */ }
  }
  const denyFunction = refuse('the Function constructor');
  for (const F of [Function, (async function () {}).constructor, (function* () {}).constructor,
      (async function* () {}).constructor]) {
    Object.defineProperty(F.prototype, 'constructor', { value: denyFunction, writable: false, configurable: false });
  }
  Object.defineProperty(globalThis, 'Function', { value: denyFunction, writable: false, configurable: false });
  Object.defineProperty(globalThis, 'eval', { value: refuse('eval'), writable: false, configurable: false });
  return true;
})()`;

/** Resets what a run leaves in R's session: wraps a run's code (scripts and function calls). */
export function isolated(body: string): string {
  // Global variables, options, attached packages, environment variables, R's temporary files and
  // open devices are put back (devices closed before the copy-back so that a PDF without
  // dev.off() is complete, as with native R). Not undone: files outside the run's directory
  // and tempdir(), loaded namespaces and what a run changed in them, hooks and finalizers
  // (docs/security.md, "Function calls and webR"). The run's own environment has base R's
  // for its parent, so the functions that put things back are base R's (or named with their
  // package), whatever a script defined in the global environment where it runs.
  return `local(envir = new.env(parent = baseenv()), {
      opts <- options(); attached <- search(); envs <- as.list(Sys.getenv())
      on.exit({
        grDevices::graphics.off(); setwd("/")
        added <- setdiff(names(options()), names(opts))
        options(c(opts, stats::setNames(vector("list", length(added)), added)))
        for (name in setdiff(search(), attached)) detach(name, character.only = TRUE)
        Sys.unsetenv(setdiff(names(Sys.getenv()), names(envs)))
        if (length(envs) > 0L) do.call(Sys.setenv, envs)
        rm(list = ls(globalenv(), all.names = TRUE), envir = globalenv())
        unlink(list.files(tempdir(), all.files = TRUE, full.names = TRUE, no.. = TRUE),
               recursive = TRUE, force = TRUE)
      })
      ${body}
    })`;
}

/** An R string literal; JSON's escapes (\", \\, \n, \uXXXX) are valid in R. */
export function rString(value: string): string {
  return JSON.stringify(value);
}

export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** What a refusal of WORKER_HARDENING looks like when it surfaces as a JavaScript error. */
export const REFUSED_PATTERN = /is not available to jobs/;

/** What R's `quit(status = n)` looks like when it surfaces from webR's worker. */
export const EXIT_PATTERN = /Program terminated with exit\((\d+)\)/;

/**
 * A function's answer as R handed it back, not trusted: c("ok", value) with a value of at most
 * maxBytes, or c("fail", reason, message) with a known reason; anything else is an R error.
 */
export function parseAnswer(
  answer: unknown[],
  functionName: string,
  maxBytes: number,
): FunctionCallOutcome {
  if (answer.length === 2 && answer[0] === 'ok' && typeof answer[1] === 'string') {
    const bytes = Buffer.byteLength(answer[1]);
    if (bytes > maxBytes) {
      return {
        status: 'failed',
        reason: 'too-large',
        message: `${functionName} returned ${bytes} bytes, more than MAX_REQUEST_BYTES (${maxBytes} bytes)`,
      };
    }
    return { status: 'succeeded', value: answer[1] };
  }
  if (
    answer.length === 3 &&
    answer[0] === 'fail' &&
    typeof answer[1] === 'string' &&
    R_REPORTED_FAILURES.has(answer[1]) &&
    typeof answer[2] === 'string'
  ) {
    return {
      status: 'failed',
      reason: answer[1] as FunctionCallFailure,
      message: answer[2].slice(0, 4096),
    };
  }
  return { status: 'failed', reason: 'r-error', message: 'malformed answer from R' };
}
