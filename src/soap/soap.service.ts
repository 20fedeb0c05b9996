import { Injectable, Logger } from '@nestjs/common';
import type { Request } from 'express';
import { publicBaseUrl, RestLinks } from '../common/public-uri';
import { IntakeLimitsConfig, NodeConfig, SoapConfig } from '../config/config-slices';
import { JobRecordsRepository } from '../queue/job-records.repository';
import { ResultRepository } from '../results/result.repository';
import { mtomAnswer, type MtomAnswer } from './mtom-writer';
import { HttpAnswer } from '../common/http-answer';
import { SoapFault } from './soap-fault';
import { SoapJobService, SoapSubmittedJob } from './soap-job.service';
import { SOAP_TYPES_NAMESPACE } from './envelope-reader';
import {
  ReceivedSoapRequest,
  readSoapRequest,
  SoapProcessCall,
  SoapRequestLimits,
} from './soap-request-reader';
import { answerPayloads, loadResult, resultEnvelope } from './soap-result';
import { JobWaiter } from '../queue/job-waiter.service';

/** The SOAPAction of `Process` as the WSDL declares it. */
export const PROCESS_ACTION = 'urn:svc:soap:Process';
/** The body element of `Process`: the operation is recognised by it, not by SOAPAction. */
export const PROCESS_ELEMENT = 'job';

/** SOAPAction as sent, without the quotes HTTP requires around it. */
function unquoted(action: string): string {
  const trimmed = action.trim();
  return trimmed.length >= 2 && trimmed.startsWith('"') && trimmed.endsWith('"')
    ? trimmed.slice(1, -1)
    : trimmed;
}

/**
 * One SOAP call (SPEC §7): read the envelope, submit the job, wait for its result, answer MTOM.
 * Failures are thrown (SoapFault or the ApiErrors REST would answer) for SoapFaultFilter.
 */
@Injectable()
export class SoapService {
  private readonly logger = new Logger('SOAP');

  constructor(
    private readonly config: SoapConfig,
    private readonly intakeLimits: IntakeLimitsConfig,
    private readonly node: NodeConfig,
    private readonly soapJobs: SoapJobService,
    private readonly waiter: JobWaiter,
    private readonly results: ResultRepository,
    private readonly jobs: JobRecordsRepository,
  ) {}

  private get limits(): SoapRequestLimits {
    return {
      maxRequestBytes: this.intakeLimits.maxRequestBytes,
      maxPayloads: this.config.soapMaxPayloads,
      maxParameters: this.config.soapMaxParameters,
    };
  }

  async process(req: Request, clientGone: AbortSignal): Promise<HttpAnswer> {
    const job = await this.submit(req);
    // A client that hangs up stops the wait (its job still runs and keeps its result).
    const timeoutSeconds = this.config.soapTimeoutSeconds;
    const ready = await this.waiter.waitFor(
      job.jobId,
      () => this.results.findMetadata(job.applicationName, job.jobId),
      timeoutSeconds * 1000,
      { signal: clientGone },
    );
    if (clientGone.aborted) {
      this.logger.log(`job ${job.jobId}: the SOAP client left before its result was ready`);
      // Nobody reads it: the connection is gone.
      return new HttpAnswer(null, { status: 204 });
    }
    const result = ready && (await loadResult(this.results, job.applicationName, job.jobId));
    if (!result) {
      const resultUri = new RestLinks(publicBaseUrl(req, this.node.publicBaseUrl)).result(
        job.applicationName,
        job.jobId,
      );
      throw new SoapFault(
        'Server',
        `Job ${job.jobId} of application ${job.applicationName} has not finished within ` +
          `${timeoutSeconds} s (SOAP_TIMEOUT_SECONDS). It stays queued or running; ` +
          `fetch its result later at ${resultUri}.`,
      );
    }
    if (!result.success) {
      const stored = await this.jobs.findOne(job.applicationName, job.jobId);
      if (stored?.cancelledAt) {
        throw new SoapFault(
          'Server',
          `Job ${job.jobId} of application ${job.applicationName} was cancelled by ` +
            `${stored.cancelledBy ?? 'anonymous'} at ${stored.cancelledAt.toISOString()}.`,
        );
      }
    }
    const answer = await answerPayloads(result, job.singleZip);
    let mtom: MtomAnswer;
    try {
      mtom = mtomAnswer(
        resultEnvelope(result, answer.payloads),
        answer.payloads.map((payload) => payload.attachment),
      );
    } catch (error) {
      await answer.dispose();
      throw error;
    }
    // Sent, cut or abandoned by a client that left: the payloads' files go then.
    mtom.body.once('close', () => void answer.dispose());
    return new HttpAnswer(mtom.body, { status: 200, headers: mtom.headers });
  }

  /** Reads the request and stores its job; the payloads' temporary files are gone afterwards. */
  private async submit(req: Request): Promise<SoapSubmittedJob> {
    const received = await readSoapRequest(req, this.limits);
    try {
      return await this.soapJobs.submit(req, processCallOf(received));
    } finally {
      await received.cleanup();
    }
  }
}

/**
 * The call of `Process`, told by the body element (a missing or empty SOAPAction is accepted);
 * a SOAPAction naming another operation, or another body element, is a client fault.
 */
export function processCallOf(received: ReceivedSoapRequest): SoapProcessCall {
  const { namespace, localName } = received.operation;
  if (namespace !== SOAP_TYPES_NAMESPACE || localName !== PROCESS_ELEMENT) {
    throw new SoapFault(
      'Client',
      `Unknown operation: the body element {${namespace}}${localName} is not a request of this ` +
        `endpoint. Its one operation, Process, takes {${SOAP_TYPES_NAMESPACE}}${PROCESS_ELEMENT}.`,
    );
  }
  const action = received.soapAction === undefined ? '' : unquoted(received.soapAction);
  if (action !== '' && action !== PROCESS_ACTION) {
    throw new SoapFault(
      'Client',
      `SOAPAction "${action}" names no operation of this endpoint: send "${PROCESS_ACTION}" ` +
        '(or none) with the Process request.',
    );
  }
  if (received.call === null) {
    throw new SoapFault('Client', `The ${PROCESS_ELEMENT} element could not be read.`);
  }
  return received.call;
}
