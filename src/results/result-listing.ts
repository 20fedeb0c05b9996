import { Readable } from 'node:stream';
import type { RestLinks } from '../common/public-uri';
import { RestFormat, RestListStreamWriter } from '../common/representation/rest-representation';
import { ResultRepresentation, ResultsRepresentation, resultView } from './result-view';
import type { ResultRepository } from './result.repository';

/** Results are read in pages of this size when listed whole, so the list is never all in memory. */
const LIST_PAGE_SIZE = 500;

export interface ResultListingRequest {
  applicationName: string;
  /** At most this many results; all when undefined. */
  limit: number | undefined;
  offset: number;
  links: RestLinks;
  format: RestFormat;
}

/**
 * An application's results as one `results` representation, newest first, read page by page
 * while it is sent. The first page is read before this returns, so a database failure is still
 * a clean 503; a later one makes the stream fail, which cuts the answer (the client sees an
 * incomplete body, not a short list).
 */
export async function resultListing(
  results: ResultRepository,
  request: ResultListingRequest,
): Promise<Readable> {
  const { applicationName, limit, offset, links, format } = request;
  const first = await results.page(
    applicationName,
    Math.min(limit ?? LIST_PAGE_SIZE, LIST_PAGE_SIZE),
    null,
    offset,
  );
  async function* chunks(): AsyncGenerator<string> {
    const pending: string[] = [];
    const writer = new RestListStreamWriter(
      new ResultsRepresentation([]).toElement(),
      format,
      (chunk) => pending.push(chunk),
    );
    let page = first;
    let remaining = limit ?? Number.POSITIVE_INFINITY;
    while (page.length > 0 && remaining > 0) {
      for (const result of page.slice(0, remaining)) {
        writer.add(new ResultRepresentation(resultView(links, result)));
      }
      yield pending.splice(0).join('');
      remaining -= page.length;
      if (page.length < LIST_PAGE_SIZE || remaining <= 0) {
        break;
      }
      const last = page[page.length - 1];
      page = await results.page(applicationName, Math.min(remaining, LIST_PAGE_SIZE), last);
    }
    writer.end();
    yield pending.splice(0).join('');
  }
  return Readable.from(chunks());
}
