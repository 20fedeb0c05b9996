import type { ServerResponse } from 'node:http';
import { mtomAnswer, type MtomAttachment } from '../../src/soap/mtom-writer';

/**
 * Serves an MTOM answer on a bare HTTP response as the service's adapter does (a returned
 * Readable body): headers, then the body piped, destroyed when the client leaves, and the
 * response destroyed when the body fails. Resolves when the response has closed; rejects with
 * the body's error.
 */
export function writeMtomResponse(
  res: ServerResponse,
  status: number,
  envelopeXml: string,
  attachments: MtomAttachment[],
): Promise<void> {
  const answer = mtomAnswer(envelopeXml, attachments);
  return new Promise<void>((resolve, reject) => {
    res.writeHead(status, answer.headers);
    answer.body.once('error', (error) => {
      res.destroy();
      reject(error);
    });
    res.once('close', () => {
      answer.body.destroy();
      resolve();
    });
    answer.body.pipe(res);
  });
}
