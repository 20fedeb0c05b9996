import type { RestLinks } from '../common/public-uri';
import type { RestElement, RestView } from '../common/representation/rest-representation';
import type { ResultMetadata } from './result.repository';

export interface ResultView {
  jobId: string;
  applicationName: string;
  resultTime: Date;
  success: boolean;
  /** The data's extension: zip, xml, json, txt, ... */
  type: string;
  selfUri: string;
  dataUri: string;
}

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

/** `result`: every value an attribute. */
export class ResultRepresentation implements RestView {
  constructor(private readonly view: ResultView) {}

  toElement(): RestElement {
    const v = this.view;
    return {
      name: 'result',
      attributes: {
        jobId: v.jobId,
        applicationName: v.applicationName,
        resultTime: v.resultTime,
        success: v.success,
        type: v.type,
        selfUri: v.selfUri,
        dataUri: v.dataUri,
      },
    };
  }
}

/** `results`: one `result` per stored result. */
export class ResultsRepresentation implements RestView {
  constructor(private readonly views: readonly ResultView[]) {}

  toElement(): RestElement {
    return {
      name: 'results',
      attributes: {},
      lists: { result: 'results' },
      children: this.views.map((view) => new ResultRepresentation(view).toElement()),
    };
  }
}
