import { Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { rawHeaderPairs, rawHeaderValues } from '../common/application-name';
import { parseMetaHeaders } from '../job-core/job-meta';
import { parsePriority, PRIORITY_HEADER } from '../jobs/job-priority';
import { JobTokenRepresentation, jobTokenOf } from '../jobs/jobs-view';
import { JobsService } from '../jobs/jobs.service';
import { callbackRequest } from '../jobs/rest-submission';
import { principalOf } from '../security/principal';
import { ApiError } from '../common/api-error';
import type { FunctionCallOutcome } from '../r-engine/function-call-engine';
import { FunctionLibraryService } from '../r-engine/function-library';
import { ProcessService } from '../process/process.service';
import { ExportedFunction, R_FUNCTION_NAME } from '../r-engine/exported-functions';
import { functionsOpenApi } from './functions-openapi';
import { JobSource } from '../queue/queue.types';

/** What a call of an exported function answers: its JSON, or an error of the API. */
export interface ExportedCallAnswer {
  status: 200;
  body: string;
}

/**
 * Exported R functions as endpoints (docs/functions.md). The list is read from the application's
 * library, which every node drops when the catalog changes (FunctionLibraryService), so the list
 * and the sessions change together, without a restart.
 */
@Injectable()
export class FunctionsService {
  constructor(
    private readonly libraries: FunctionLibraryService,
    private readonly process: ProcessService,
    private readonly jobs: JobsService,
  ) {}

  list(applicationName: string): Promise<ExportedFunction[]> {
    return this.libraries.exported(applicationName);
  }

  /** The exported functions, or the 404 a call would answer when there are none. */
  async listExported(applicationName: string): Promise<ExportedFunction[]> {
    const functions = await this.list(applicationName);
    if (functions.length === 0) {
      throw noExportedFunction(applicationName);
    }
    return functions;
  }

  /** The exported function, or a 404 that says what is exported. */
  async find(applicationName: string, functionName: string): Promise<ExportedFunction> {
    const functions = await this.list(applicationName);
    const found = R_FUNCTION_NAME.test(functionName)
      ? functions.find((f) => f.name === functionName)
      : undefined;
    if (!found) {
      throw functions.length === 0
        ? noExportedFunction(applicationName)
        : ApiError.notFound(
            `Application ${applicationName} exports no function ${JSON.stringify(functionName.slice(0, 100))}; it exports ${functions.map((f) => f.name).join(', ')}.`,
          );
    }
    return found;
  }

  /**
   * Calls the exported function (found by `find` first: the controller checks before it reads
   * the body) with the arguments (a JSON object, checked by the caller) on a warm session, at
   * once; R's failures become the API's errors. R looks the name up in the library alone.
   */
  async call(
    applicationName: string,
    functionName: string,
    argumentsJson: string,
  ): Promise<ExportedCallAnswer> {
    const outcome = await this.process.callExported(applicationName, functionName, argumentsJson);
    return answerOf(applicationName, functionName, outcome);
  }

  /**
   * Queues the call as an ordinary JSON function-call job (Prefer: respond-async): the intake's
   * limits, callback and meta headers as for `POST /jobs`; the worker calls the function.
   */
  async queue(
    applicationName: string,
    functionName: string,
    argumentsJson: string,
    req: Request,
    baseUrl: string,
  ): Promise<{ token: JobTokenRepresentation; resultUri: string }> {
    const job = await this.jobs.submit({
      applicationName,
      source: JobSource.REST,
      meta: parseMetaHeaders(rawHeaderPairs(req)),
      callback: callbackRequest(req, baseUrl),
      parts: [
        { name: 'body', label: null, content: Buffer.from(argumentsJson, 'utf8'), zip: false },
      ],
      functionCall: 'json',
      exportedFunction: functionName,
      caller: { kind: 'request', principal: principalOf(req) ?? null },
      priority: parsePriority(
        rawHeaderValues(req, PRIORITY_HEADER),
        `The header ${PRIORITY_HEADER}`,
      ),
    });
    return jobTokenOf(baseUrl, job);
  }

  async openApi(applicationName: string, baseUrl: string): Promise<object> {
    return functionsOpenApi(applicationName, await this.listExported(applicationName), baseUrl);
  }
}

function noExportedFunction(applicationName: string): ApiError {
  return ApiError.notFound(`Application ${applicationName} exports no R function.`);
}

/** The answer of a call's outcome: 200 with its JSON, 404 when R has no such function, else 400. */
export function answerOf(
  applicationName: string,
  functionName: string,
  outcome: FunctionCallOutcome,
): ExportedCallAnswer {
  if (outcome.status === 'succeeded') {
    return { status: 200, body: outcome.value };
  }
  if (outcome.reason === 'missing-function') {
    throw ApiError.notFound(
      `Application ${applicationName} defines no function ${functionName}: ${outcome.message}`,
    );
  }
  throw ApiError.badRequest(
    outcome.reason === 'bad-argument' ? outcome.message : `${functionName}: ${outcome.message}`,
  );
}
