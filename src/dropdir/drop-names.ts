import { join } from 'node:path';

/** The folders under an application's drop directory (docs/operations.md#drop-directory). */
export const DROP_FOLDERS = ['inbox', 'processing', 'accepted', 'rejected', 'outbox'] as const;

/** An application's drop directory and its folders, as absolute paths. */
export interface DropDirectory {
  applicationName: string;
  root: string;
  inbox: string;
  processing: string;
  accepted: string;
  rejected: string;
  outbox: string;
}

export function dropDirectory(applicationName: string, root: string): DropDirectory {
  return {
    applicationName,
    root,
    inbox: join(root, 'inbox'),
    processing: join(root, 'processing'),
    accepted: join(root, 'accepted'),
    rejected: join(root, 'rejected'),
    outbox: join(root, 'outbox'),
  };
}

/** A file still being written: a hidden name, or one ending in .tmp or .part. Left alone. */
export function isTemporaryName(name: string): boolean {
  return name.startsWith('.') || /\.(tmp|part)$/i.test(name);
}

/** What a dropped file is, by its name's extension; null: neither (it is rejected). */
export function droppedKind(name: string): 'zip' | 'script' | null {
  if (/\.zip$/i.test(name)) {
    return 'zip';
  }
  return /\.r$/i.test(name) ? 'script' : null;
}

const CLAIM = /^([0-9a-f]{16})\.(.+)$/s;

/** The name of a claimed file in processing/<node>/: the claim's id, a dot, the original name. */
export function claimName(claimId: string, fileName: string): string {
  return `${claimId}.${fileName}`;
}

/** The claim's id and the original name of a file in processing/<node>/; null: not a claim. */
export function parseClaimName(name: string): { claimId: string; fileName: string } | null {
  const match = CLAIM.exec(name);
  return match ? { claimId: match[1], fileName: match[2] } : null;
}

/** The outbox file of a job's result: `<name>.result.zip`, or `<name>.result.txt` (an error). */
export function resultFileName(fileName: string, resultType: string): string {
  return `${fileName}.result.${resultType === 'zip' ? 'zip' : 'txt'}`;
}

/** The file next to a rejected one that says why. */
export function errorFileName(fileName: string): string {
  return `${fileName}.error.txt`;
}
