import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { buffer } from 'node:stream/consumers';
import { openZip, zipEntryName } from '../common/zip-reader';
import type { NeededResult } from '../queue/queue-needs';

/** Thrown when a needed step's result cannot be laid out (a name a folder cannot hold). */
export class NeededResultError extends Error {}

/** A path of a result ZIP that stays below its folder: plain components, no `..`, no `\`. */
function safeEntryPath(name: string): string | null {
  const components = name.split('/');
  const plain = components.every(
    (c) => c !== '' && c !== '.' && c !== '..' && !c.includes('\\') && !c.includes('\0'),
  );
  return plain ? components.join('/') : null;
}

/**
 * Lays out what a flow's script step needs in its working directory, before R runs: each needed
 * step's result under a folder named after the step (a script step's result files as its ZIP
 * held them, another step's result as `result.<type>`). A needed step that did not succeed has no
 * folder: the script tells a missing input by it. Returns the folders' names, which the service
 * put there (they are not packed into the step's own result). The paths are the service's own,
 * made before the job runs, in a directory only the service has written to yet.
 */
export async function writeNeededResults(
  workDir: string,
  needs: NeededResult[],
): Promise<string[]> {
  const folders: string[] = [];
  for (const need of needs) {
    if (!need.succeeded) {
      continue;
    }
    const folder = join(workDir, need.name);
    mkdirSync(folder, { mode: 0o700 });
    folders.push(need.name);
    if (need.type !== 'zip') {
      writeFileSync(join(folder, `result.${need.type ?? 'txt'}`), need.data);
      continue;
    }
    const zip = await openZip(need.data);
    try {
      // The central directory first, then the entries (zip-reader.ts).
      const entries = [];
      for await (const entry of zip.eachEntry()) {
        entries.push(entry);
      }
      for (const entry of entries) {
        const name = zipEntryName(entry);
        if (name.endsWith('/')) {
          continue; // a directory entry: made with the files below it
        }
        const path = safeEntryPath(name);
        if (path === null) {
          throw new NeededResultError(
            `the result of step ${need.name} has a file name a folder cannot hold: ${JSON.stringify(name.slice(0, 200))}`,
          );
        }
        const target = join(folder, path);
        const content = await buffer(await zip.openReadStreamPromise(entry));
        try {
          mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
          writeFileSync(target, content, { mode: 0o600 });
        } catch (error) {
          // Two entries that cannot both be (a file and a folder of one name): the step's input
          // cannot be laid out, which is its failure, not the node's.
          throw new NeededResultError(
            `the result of step ${need.name} could not be laid out at ${JSON.stringify(path.slice(0, 200))}: ${(error as Error).message}`,
          );
        }
      }
    } finally {
      zip.close();
    }
  }
  return folders;
}

/**
 * A flow's function step's arguments (a JSON object's text) with each needed step's JSON value
 * as the argument named after it, spliced in as text (nothing parsed or rewritten, so no value
 * loses precision). A needed step that did not succeed is left out: R's `missing(<name>)` tells
 * the function so. The flow's check refused arguments named after a need.
 */
export function withNeededValues(argumentsJson: string, needs: NeededResult[]): string {
  const given = needs
    .filter((need) => need.succeeded && need.type === 'json')
    .map((need) => `${JSON.stringify(need.name)}:${need.data.toString('utf8')}`);
  if (given.length === 0) {
    return argumentsJson;
  }
  const rest = argumentsJson.trim().slice(1).trim();
  return rest === '}' ? `{${given.join(',')}}` : `{${given.join(',')},${rest}`;
}
