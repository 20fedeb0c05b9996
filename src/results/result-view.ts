import type { RestLinks } from '../common/public-uri';
import type { ResultView } from '../common/representation/rest-representation';
import type { ResultMetadata } from './result.repository';

/** The `result` representation of a stored result: GET /results/{app}/{jobId}, listings, callbacks. */
export function resultView(links: RestLinks, result: ResultMetadata): ResultView {
  return {
    jobId: result.jobId,
    applicationName: result.applicationName,
    resultTime: result.resultTime,
    success: result.success,
    type: result.type,
    selfUri: links.result(result.applicationName, result.jobId),
    dataUri: links.resultData(result.applicationName, result.jobId, result.type),
  };
}
