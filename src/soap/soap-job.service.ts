import { readFile } from 'node:fs/promises';
import { Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { ApiError } from '../common/api-error';
import { checkApplicationName } from '../common/application-name';
import { FunctionCallKind, KIND_OF_MEDIA_TYPE, payloadText } from '../jobs/function-call-result';
import type { JobFileInput, JobMeta } from '../jobs/job-input';
import { normaliseMetaName } from '../jobs/job-meta';
import { JobsService, SubmittedJob } from '../jobs/jobs.service';
import { RequestAccessService } from '../security/request-access.service';
import { isZipPart } from '../upload/form-fields';
import type { SoapPayload, SoapProcessCall } from './soap-request-reader';

/** Marks jobs that came in over SOAP (the job's `source`, a metrics label). */
export const SOAP_SOURCE = 'soap';

/** A job the SOAP front end stored, and how its result is to be answered. */
export interface SoapSubmittedJob extends SubmittedJob {
  /** Sent as one ZIP payload: the result goes back as the one result ZIP (SPEC §7). */
  singleZip: boolean;
}

// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

function mediaType(contentType: string): string {
  return contentType.split(';')[0].trim().toLowerCase();
}

/** The bytes of a function call's payload: R receives it as one string anyway. */
async function payloadContent(payload: SoapPayload): Promise<Buffer> {
  return readFile(payload.path);
}

function isZipPayload(payload: SoapPayload): boolean {
  return isZipPart({ originalName: payload.name, mimeType: payload.contentType });
}

/**
 * The SOAP operation `Process` as the same service calls as REST (SPEC §7): one XML or JSON
 * payload with no parameter is a function call, anything else a multi-file job. Errors are the
 * ApiErrors REST would answer (the controller's filter turns a 4xx into a soap:Client fault).
 */
@Injectable()
export class SoapJobService {
  constructor(
    private readonly jobsService: JobsService,
    private readonly requestAccess: RequestAccessService,
  ) {}

  async submit(req: Request, call: SoapProcessCall): Promise<SoapSubmittedJob> {
    const applicationName = checkApplicationName(
      call.applicationName.trim(),
      'The applicationName element',
    );
    if (call.payloads.length === 0) {
      throw ApiError.badRequest('The job has no payload element; send at least one.');
    }
    const functionCallKind = this.functionCallKind(call);
    if (functionCallKind) {
      await this.requestAccess.authorizeSubmission(req, applicationName, 'functionCall');
      const job = await this.submitFunctionCall(
        applicationName,
        functionCallKind,
        call.payloads[0],
      );
      return { ...job, singleZip: false };
    }
    await this.requestAccess.authorizeSubmission(req, applicationName, 'script');
    const meta = metaFromParameters(call.parameters);
    // Payloads stay on disk: their files (and large ZIP entries, inflated to the spill
    // directory) are streamed into the database, never held whole in memory.
    const job = await this.jobsService.withSpillDirectory(async (spillDirectory) => {
      const files: JobFileInput[] = [];
      for (const payload of call.payloads) {
        files.push(...(await this.jobFiles(payload, spillDirectory)));
      }
      return this.jobsService.submitFiles(applicationName, files, meta, SOAP_SOURCE);
    });
    return { ...job, singleZip: call.payloads.length === 1 && isZipPayload(call.payloads[0]) };
  }

  private functionCallKind(call: SoapProcessCall): FunctionCallKind | undefined {
    if (call.payloads.length !== 1 || call.parameters.length !== 0) {
      return undefined;
    }
    return KIND_OF_MEDIA_TYPE[mediaType(call.payloads[0].contentType)];
  }

  private async submitFunctionCall(
    applicationName: string,
    kind: FunctionCallKind,
    payload: SoapPayload,
  ): Promise<SubmittedJob> {
    const content = await payloadContent(payload);
    if (content.length === 0) {
      throw ApiError.badRequest(
        `The payload "${payload.name}" is empty; send the ${kind.toUpperCase()} of the function call.`,
      );
    }
    if (payloadText(content) === null) {
      throw ApiError.badRequest(`The payload "${payload.name}" is not UTF-8 text.`);
    }
    return this.jobsService.submitFunctionCall(applicationName, kind, content, {}, SOAP_SOURCE);
  }

  /** A payload's job files: a ZIP exploded under the ZIP body rules, another file as it is. */
  private async jobFiles(payload: SoapPayload, spillDirectory: string): Promise<JobFileInput[]> {
    if (!isZipPayload(payload)) {
      return [{ name: payload.name, path: payload.path }];
    }
    if (payload.size === 0) {
      throw ApiError.badRequest(
        `The payload "${payload.name}" is empty: a ZIP archive was expected.`,
      );
    }
    try {
      return await this.jobsService.explodeZip({ path: payload.path }, spillDirectory);
    } catch (error) {
      if (error instanceof ApiError) {
        throw new ApiError(error.getStatus(), `in the payload "${payload.name}": ${error.message}`);
      }
      throw error;
    }
  }
}

/**
 * Meta parameters (type A: the name as given, `rScript`/`sweaveFile` in any case) from the
 * parameter elements, under the rules of meta headers: a name must be non-empty, free of control
 * characters and given once.
 */
export function metaFromParameters(parameters: SoapProcessCall['parameters']): JobMeta {
  const meta = new Map<string, string>();
  for (const { name: rawName, value } of parameters) {
    if (rawName.trim() === '') {
      throw ApiError.badRequest('A parameter element has an empty name.');
    }
    if (CONTROL_CHARACTERS.test(rawName)) {
      throw ApiError.badRequest(
        `The parameter name ${JSON.stringify(rawName)} contains control characters.`,
      );
    }
    const name = normaliseMetaName(rawName);
    if (meta.has(name)) {
      throw ApiError.badRequest(`The parameter "${name}" is given more than once.`);
    }
    meta.set(name, value);
  }
  // fromEntries defines own properties, so a name like `__proto__` stays a plain key.
  return Object.fromEntries(meta);
}
