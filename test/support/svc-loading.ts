import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runSvc } from './service-process';

/**
 * What the command line's specs ask of a run of `svc`: the files it loaded, the exit statuses its
 * help lists, the words of HTTP its messages do not use.
 */

/** Runs `svc` and returns the files its process loaded besides its answer. */
export async function svcLoading(
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number; output: string; stdout: string; loaded: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-loaded-'));
  try {
    const file = join(dir, 'loaded.json');
    const answer = await runSvc(args, {
      ...env,
      NODE_OPTIONS: `--import ${join(__dirname, '..', 'support', 'loaded-modules.mjs')}`,
      SVC_TEST_LOADED_MODULES: file,
    });
    return { ...answer, loaded: JSON.parse(readFileSync(file, 'utf8')) as string[] };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The packages among loaded files: `node_modules/<package>/`. */
export function packagesOf(loaded: string[]): Set<string> {
  return new Set(
    loaded.flatMap((file) => /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(file)?.[1] ?? []),
  );
}

/** What `svc --help` lists under "Exit status:": meaning → status. */
export function exitStatusesOf(help: string): Array<{ status: number; meaning: string }> {
  const line = /^Exit status: (.*)\.$/m.exec(help);
  expect(line).not.toBeNull();
  return line![1].split(', ').map((entry) => {
    const [, status, meaning] = /^(\d+) (.*)$/.exec(entry)!;
    return { status: Number(status), meaning };
  });
}

/** The status `svc --help` lists for the meaning that contains `words`. */
export function listedStatus(help: string, words: string): number {
  const found = exitStatusesOf(help).filter((entry) => entry.meaning.includes(words));
  expect(found).toHaveLength(1);
  return found[0].status;
}

/** Words of HTTP that the command line's messages do not use. */
export const HTTP_WORDS = /If-Match|ETag|\bGET\b|\bPUT\b|\bPOST\b|\bHTTP\b|\b(?:4\d\d|5\d\d)\b/;
