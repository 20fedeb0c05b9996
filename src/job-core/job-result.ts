import { createHash } from 'node:crypto';
import { ResultData } from '../queue/queue.types';

export function sha256Hex(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

export function resultData(
  success: boolean,
  type: string,
  contentType: string,
  data: Buffer,
): ResultData {
  return { success, type, contentType, data, sha256: sha256Hex(data) };
}

/** A result whose bytes are in a file (a large ZIP), stored in pieces by complete(). */
export function resultDataFile(
  success: boolean,
  type: string,
  contentType: string,
  file: { path: string; size: number; sha256: string },
): ResultData {
  return {
    success,
    type,
    contentType,
    data: Buffer.alloc(0),
    sha256: file.sha256,
    dataFile: { path: file.path, size: file.size },
  };
}

/** The plain-text body of a failed job: job id, submission time and the reason (SPEC §5.1). */
export function errorResult(
  job: { id: string; applicationName: string; submittedAt: Date },
  message: string,
): ResultData {
  const text =
    `Job ${job.id} of application ${job.applicationName}, submitted ${job.submittedAt.toISOString()}, failed.\n` +
    `${message.trim()}\n`;
  return resultData(false, 'txt', 'text/plain; charset=utf-8', Buffer.from(text, 'utf8'));
}
