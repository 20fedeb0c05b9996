import { Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { ApiError } from '../common/api-error';
import { checkApplicationName } from '../common/application-name';
import { mediaType } from '../common/media-type';
import { FunctionCallKind, KIND_OF_MEDIA_TYPE } from '../job-core/function-call-result';
import { isZipUpload } from '../jobs/job-archive';
import { parseMetaParameters } from '../job-core/job-meta';
import { parsePriority } from '../jobs/job-priority';
import { JobsService, SubmittedJob } from '../jobs/jobs.service';
import { RequestAccessService } from '../security/request-access.service';
import type { SoapPayload, SoapProcessCall } from './soap-request-reader';
import { JobSource } from '../queue/queue.types';

/** A job the SOAP front end stored, and how its result is to be answered. */
export interface SoapSubmittedJob extends SubmittedJob {
  /** Sent as one ZIP payload: the result goes back as the one result ZIP (SPEC §7). */
  singleZip: boolean;
}

function isZipPayload(payload: SoapPayload): boolean {
  return isZipUpload(payload.name, payload.contentType);
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
    const functionCall = functionCallKind(call);
    // Authenticated here (the endpoint is public: it answers its own faults); the intake
    // authorizes the caller for the application the envelope names.
    const principal = await this.requestAccess.callerOf(req);
    // Payloads stay on disk: their files (and large ZIP entries, inflated to a spill
    // directory) are streamed into the database, never held whole in memory.
    const job = await this.jobsService.submit({
      applicationName,
      source: JobSource.SOAP,
      meta: functionCall ? {} : parseMetaParameters(call.parameters),
      callback: null,
      parts: call.payloads.map((payload) => ({
        name: payload.name,
        label: `The payload "${payload.name}"`,
        path: payload.path,
        zip: !functionCall && isZipPayload(payload),
      })),
      functionCall,
      caller: { kind: 'request', principal },
      priority: parsePriority(
        call.priority === null || call.priority === undefined ? [] : [call.priority],
        'The priority element',
      ),
    });
    return {
      ...job,
      singleZip: !functionCall && call.payloads.length === 1 && isZipPayload(call.payloads[0]),
    };
  }
}

/** One XML or JSON payload and no parameter: a function call (SPEC §7). */
function functionCallKind(call: SoapProcessCall): FunctionCallKind | undefined {
  if (call.payloads.length !== 1 || call.parameters.length !== 0) {
    return undefined;
  }
  return KIND_OF_MEDIA_TYPE[mediaType(call.payloads[0].contentType)];
}
