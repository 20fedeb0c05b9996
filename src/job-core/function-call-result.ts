import { ApiError } from '../common/api-error';
import { rStringProblem } from '../common/r-values';
import {
  RestElement,
  RestView,
  renderRepresentation,
} from '../common/representation/rest-representation';
import type { FunctionName } from '../r-engine/function-call-engine';

/** A function-call job's kind, which is also its result type and body format. */
export type FunctionCallKind = 'xml' | 'json';

export const FUNCTION_OF_KIND: Record<FunctionCallKind, FunctionName> = {
  xml: 'svcXmlService',
  json: 'svcJsonService',
};

export const CONTENT_TYPE_OF_KIND: Record<FunctionCallKind, string> = {
  xml: 'application/xml; charset=utf-8',
  json: 'application/json; charset=utf-8',
};

/** The stored name of a function-call job's payload (its only file). */
export function payloadFileName(kind: FunctionCallKind): string {
  return `payload.${kind}`;
}

/**
 * The stored name of a queued exported function's call (a JSON job, src/functions/): its JSON
 * arguments, named after the function, which the worker calls with them.
 */
export function exportedCallFileName(functionName: string): string {
  return `${functionName}.arguments.json`;
}

/** The function a job file names, when it is an exported function's call; else null. */
export function exportedFunctionOfFile(fileName: string): string | null {
  const match = /^(.+)\.arguments\.json$/.exec(fileName);
  return match ? match[1] : null;
}

/** The request media types of function calls (SPEC §3.1). */
export const KIND_OF_MEDIA_TYPE: Readonly<Record<string, FunctionCallKind>> = {
  'application/xml': 'xml',
  'application/json': 'json',
};

/**
 * The body of a failed function call (SPEC §5.2): the `errorResult` document for XML, the flat
 * JSON object for JSON, naming the job (or, for /process, the call).
 */
export function functionCallErrorDocument(
  kind: FunctionCallKind,
  call: { jobId: string; applicationName: string; submissionTime: Date },
  message: string,
): string {
  const view = new ErrorResultRepresentation({ ...call, errorMessage: message });
  // The JSON one is the plain JSON of errorResult: its attributes and message, unwrapped.
  return renderRepresentation(view, kind === 'xml' ? 'xml' : 'json');
}

export interface ErrorResultView {
  jobId: string;
  applicationName: string;
  submissionTime: Date;
  errorMessage: string;
}

/** `errorResult`: the call as attributes, R's message as a child element. */
export class ErrorResultRepresentation implements RestView {
  constructor(private readonly view: ErrorResultView) {}

  toElement(): RestElement {
    const v = this.view;
    return {
      name: 'errorResult',
      attributes: {
        jobId: v.jobId,
        applicationName: v.applicationName,
        submissionTime: v.submissionTime,
      },
      children: [{ name: 'errorMessage', attributes: {}, text: v.errorMessage }],
    };
  }
}

/** A request body as the string R receives; null when it is not UTF-8. */
export function payloadText(body: Buffer): string | null {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(body);
  } catch {
    return null;
  }
}

/**
 * The payload of a function call as the string R receives, checked as a queued call (POST /jobs)
 * and a synchronous one (POST /process) both take it: not empty, UTF-8 text that R can hold as a
 * string (no NUL). A 400 naming `label` otherwise.
 */
export function functionCallText(
  kind: FunctionCallKind,
  payload: Buffer,
  label = 'The request body',
): string {
  if (payload.length === 0) {
    throw ApiError.badRequest(
      `${label} is empty; send the ${kind.toUpperCase()} payload of the function call.`,
    );
  }
  const text = payloadText(payload);
  if (text === null) {
    throw ApiError.badRequest(`${label} is not UTF-8 text.`);
  }
  // R receives the payload as one string: one it cannot hold is refused, never cut.
  const problem = rStringProblem(text);
  if (problem !== null) {
    throw ApiError.badRequest(`${label} ${problem}.`);
  }
  return text;
}
