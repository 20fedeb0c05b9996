import { mkdirSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { buffer } from 'node:stream/consumers';
import { openZip, zipEntryName } from '../common/zip-reader';
import type { NeededResult } from '../queue/queue-needs';

/** Thrown when a needed step's result cannot be laid out (a name a folder cannot hold). */
export class NeededResultError extends Error {}

/** Writes a needed result's bytes to a new file at `path` (streamed when it is large). */
export type CopyNeededResult = (result: NeededResult, path: string) => Promise<void>;

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
 * folder: the script tells a missing input by it. A ZIP is first copied to `spillDir` (the job's
 * own directory, outside the working directory), so a large one is never whole in memory.
 * Returns the folders' names, which the service put there (they are not packed into the step's
 * own result). Every path is the service's own, made before the job runs.
 */
export async function writeNeededResults(
  workDir: string,
  spillDir: string,
  needs: NeededResult[],
  copy: CopyNeededResult,
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
      await copy(need, join(folder, `result.${need.type ?? 'txt'}`));
      continue;
    }
    const zipPath = join(spillDir, `need-${need.name}.zip`);
    await copy(need, zipPath);
    try {
      await unpack(need.name, zipPath, folder);
    } finally {
      await rm(zipPath, { force: true });
    }
  }
  return folders;
}

async function unpack(step: string, zipPath: string, folder: string): Promise<void> {
  const zip = await openZip({ path: zipPath });
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
          `the result of step ${step} has a file name a folder cannot hold: ${JSON.stringify(name.slice(0, 200))}`,
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
          `the result of step ${step} could not be laid out at ${JSON.stringify(path.slice(0, 200))}: ${(error as Error).message}`,
        );
      }
    }
  } finally {
    zip.close();
  }
}

/** A needed step's JSON value, named after the step. */
export interface NeededValue {
  name: string;
  json: string;
}

/**
 * A flow's function step's arguments (a JSON object's text) with each needed step's JSON value
 * as the argument named after it, spliced in as text (nothing parsed or rewritten, so no value
 * loses precision). A needed step that did not succeed is not among `values`: R's
 * `missing(<name>)` tells the function so. The flow's check refused arguments named after a need.
 */
export function withNeededValues(argumentsJson: string, values: NeededValue[]): string {
  if (values.length === 0) {
    return argumentsJson;
  }
  const given = values.map((value) => `${JSON.stringify(value.name)}:${value.json}`);
  const rest = argumentsJson.trim().slice(1).trim();
  return rest === '}' ? `{${given.join(',')}}` : `{${given.join(',')},${rest}`;
}
