/**
 * Memory of one ROLE=all node while a large job goes through it (issue 5, SPEC §7): a form upload
 * of a file of `sizeMiB` MiB, an R script copying it (so the result ZIP is as large), the result
 * downloaded whole and as a byte range. The node's resident set (VmRSS) is sampled every 20 ms;
 * the figure is the peak during the job minus the level after a small warm-up job.
 */
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createWriteStream, openAsBlob, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BenchDatabase } from './bench-database';
import { ServiceNode } from './service-node';
import { round } from './stats';

const REST = '/svc/api/rest';
const APPLICATION = 'bench';
const MiB = 1024 * 1024;
const COPY_SCRIPT = 'stopifnot(file.copy("big.bin", "copy.bin"))\n';
const RESULT_TIMEOUT_MS = 600_000;

export interface LargeJobRun {
  run: number;
  fileBytes: number;
  resultBytes: number;
  baselineRssMiB: number;
  peakRssMiB: number;
  rssGrowthMiB: number;
  /** Peak RSS growth per phase: upload, job (R run and result storage), downloads. */
  phaseGrowthMiB: { upload: number; job: number; download: number };
  uploadSeconds: number;
  jobSeconds: number;
  downloadSeconds: number;
  downloadMiBPerSecond: number;
  rangeBytes: number;
  downloadMatchesEtag: boolean;
}

/** BENCH_NODE_ENV=K=V,K=V: extra environment for the node (e.g. glibc malloc settings). */
export function benchNodeEnv(): Record<string, string> {
  return Object.fromEntries(
    (process.env.BENCH_NODE_ENV ?? '')
      .split(',')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
}

export function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = /VmRSS:\s+(\d+) kB/.exec(status);
  return match ? Number(match[1]) * 1024 : 0;
}

/** Samples a process's resident set until stopped; `peak` is the largest seen. */
export class RssSampler {
  peak = 0;
  private readonly timer: NodeJS.Timeout;
  constructor(
    private readonly pid: number,
    intervalMs = 20,
  ) {
    this.sample();
    this.timer = setInterval(() => this.sample(), intervalMs);
  }
  private sample(): void {
    try {
      this.peak = Math.max(this.peak, rssBytes(this.pid));
    } catch {
      // The process ended.
    }
  }
  /** The peak since the last lap (or the start), then starts a new lap. */
  lap(): number {
    this.sample();
    const peak = this.peak;
    this.peak = 0;
    this.sample();
    return peak;
  }
  stop(): number {
    clearInterval(this.timer);
    return this.lap();
  }
}

export async function writeRandomFile(path: string, bytes: number): Promise<void> {
  const out = createWriteStream(path);
  for (let written = 0; written < bytes; written += MiB) {
    if (!out.write(randomBytes(Math.min(MiB, bytes - written)))) {
      await once(out, 'drain');
    }
  }
  out.end();
  await once(out, 'finish');
}

async function submitForm(base: string, files: Array<[string, Blob]>): Promise<string> {
  const form = new FormData();
  form.append('X-SVC-Application-Name', APPLICATION);
  for (const [name, blob] of files) {
    form.append('X-SVC-JobFile[]', blob, name);
  }
  const response = await fetch(`${base}${REST}/jobs`, {
    method: 'POST',
    body: form,
    headers: { Accept: 'application/vnd.svc+json' },
  });
  const text = await response.text();
  if (response.status !== 202) {
    throw new Error(`submission answered ${response.status}: ${text.slice(0, 300)}`);
  }
  const token = (JSON.parse(text) as { jobToken: { resultUri: string } }).jobToken;
  return token.resultUri;
}

async function waitForDataUri(resultUri: string): Promise<string> {
  const deadline = Date.now() + RESULT_TIMEOUT_MS;
  for (;;) {
    const response = await fetch(resultUri, { headers: { Accept: 'application/vnd.svc+json' } });
    const text = await response.text();
    if (response.status === 200) {
      const result = (JSON.parse(text) as { result: { success: boolean; dataUri: string } }).result;
      if (!result.success) {
        throw new Error(`the job failed: ${text}`);
      }
      return result.dataUri;
    }
    if (response.status !== 404 || Date.now() > deadline) {
      throw new Error(`result at ${resultUri}: ${response.status} ${text.slice(0, 300)}`);
    }
    await sleep(100);
  }
}

/** Reads a response body without keeping it: its size and SHA-256. */
async function drain(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ bytes: number; sha256: string; etag: string | null }> {
  const response = await fetch(url, { headers });
  if (!response.ok || !response.body) {
    throw new Error(`GET ${url}: ${response.status}`);
  }
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const piece of response.body as AsyncIterable<Uint8Array>) {
    hash.update(piece);
    bytes += piece.length;
  }
  return { bytes, sha256: hash.digest('hex'), etag: response.headers.get('etag') };
}

export async function largeJobRun(
  database: BenchDatabase,
  options: {
    run: number;
    sizeMiB: number;
    main: string;
    log: (line: string) => void;
    track: (node: ServiceNode | null) => void;
  },
): Promise<LargeJobRun> {
  const dir = await mkdtemp(join(tmpdir(), 'svc-bench-large-'));
  const node = await ServiceNode.start({
    role: 'all',
    databaseUrl: database.url,
    scriptSlots: 1,
    main: options.main,
    env: {
      MAX_REQUEST_BYTES: String((options.sizeMiB + 16) * MiB),
      LOG_LEVEL: 'warn',
      ...benchNodeEnv(),
    },
  });
  options.track(node);
  try {
    const script = new Blob([COPY_SCRIPT]);
    // Warm-up: every code path once with a small file, so the baseline includes what any job
    // loads (modules, pools, R's fork server).
    await drain(
      await waitForDataUri(
        await submitForm(node.url, [
          ['copy.R', script],
          ['big.bin', new Blob([randomBytes(64 * 1024)])],
        ]),
      ),
    );
    await sleep(1000);
    const baseline = rssBytes(node.pid);
    const path = join(dir, 'big.bin');
    const fileBytes = options.sizeMiB * MiB;
    await writeRandomFile(path, fileBytes);
    const sampler = new RssSampler(node.pid);
    const t0 = performance.now();
    // openAsBlob streams the file from disk as fetch sends it.
    const resultUri = await submitForm(node.url, [
      ['copy.R', script],
      ['big.bin', await openAsBlob(path)],
    ]);
    const t1 = performance.now();
    const uploadPeak = sampler.lap();
    const dataUri = await waitForDataUri(resultUri);
    const t2 = performance.now();
    const jobPeak = sampler.lap();
    const whole = await drain(dataUri);
    const t3 = performance.now();
    const start = Math.floor(whole.bytes / 3);
    const end = Math.floor((2 * whole.bytes) / 3);
    const range = await drain(dataUri, { Range: `bytes=${start}-${end}` });
    const downloadPeak = sampler.stop();
    const peak = Math.max(uploadPeak, jobPeak, downloadPeak);
    const growth = (bytes: number): number => round((bytes - baseline) / MiB, 1);
    const identical = whole.etag === `"${whole.sha256}"` && range.bytes === end - start + 1;
    const run: LargeJobRun = {
      run: options.run,
      fileBytes,
      resultBytes: whole.bytes,
      baselineRssMiB: round(baseline / MiB, 1),
      peakRssMiB: round(peak / MiB, 1),
      rssGrowthMiB: growth(peak),
      phaseGrowthMiB: {
        upload: growth(uploadPeak),
        job: growth(jobPeak),
        download: growth(downloadPeak),
      },
      uploadSeconds: round((t1 - t0) / 1000, 2),
      jobSeconds: round((t2 - t1) / 1000, 2),
      downloadSeconds: round((t3 - t2) / 1000, 2),
      downloadMiBPerSecond: round(whole.bytes / MiB / ((t3 - t2) / 1000), 1),
      rangeBytes: range.bytes,
      downloadMatchesEtag: identical,
    };
    options.log(
      `  run ${run.run}: ${options.sizeMiB} MiB file -> ${round(run.resultBytes / MiB, 1)} MiB result; ` +
        `RSS ${run.baselineRssMiB} -> peak ${run.peakRssMiB} MiB (+${run.rssGrowthMiB} MiB; upload ` +
        `+${run.phaseGrowthMiB.upload}, job +${run.phaseGrowthMiB.job}, download +${run.phaseGrowthMiB.download}); ` +
        `upload ${run.uploadSeconds} s, job ${run.jobSeconds} s, download ${run.downloadSeconds} s` +
        `${identical ? '' : ' (RESULT MISMATCH)'}`,
    );
    return run;
  } finally {
    await node.stop();
    await rm(dir, { recursive: true, force: true });
  }
}
