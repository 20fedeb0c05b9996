import { All, Controller, Get, HttpCode, Param, Post, Req, Res, UseGuards } from '@nestjs/common';
import { RendersRepresentations } from '../common/representation.interceptor';
import type { Request, Response } from 'express';
import getRawBody from 'raw-body';
import { AppConfig } from '../config/app-config';
import { ApiError } from '../common/api-error';
import {
  ApplicationNameGuard,
  ApplicationNamePipe,
  applicationNameOf,
  JobIdPipe,
  rawHeaderPairs,
} from '../common/application-name';
import { isFormPost } from '../common/form-post';
import { methodNotAllowed } from '../common/method-not-allowed';
import { publicBaseUrl, RestLinks } from '../common/public-uri';
import { RestRepresentation } from '../common/representation/rest-representation';
import { Access } from '../security/access.decorator';
import { FormJobService } from '../upload/form-job.service';
import { parseMetaHeaders } from './job-meta';
import { JobRepository } from './job.repository';
import { JobsService, SubmittedJob } from './jobs.service';
import { JobState } from './job.entity';
import { KIND_OF_MEDIA_TYPE, payloadText } from './function-call-result';

const ZIP_TYPES = new Set(['application/zip', 'application/x-zip', 'application/x-zip-compressed']);

export function mediaTypeOf(req: Request): string {
  return (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
}

@RendersRepresentations()
@Controller('svc/api/rest/jobs')
export class JobsController {
  constructor(
    private readonly config: AppConfig,
    private readonly jobsService: JobsService,
    private readonly jobs: JobRepository,
    private readonly formJobs: FormJobService,
  ) {}

  @Post()
  @Access('submitJob')
  @HttpCode(202)
  @UseGuards(ApplicationNameGuard)
  async submit(
    @Req() req: Request,
    @Res({ passthrough: true }) res: Response,
  ): Promise<RestRepresentation> {
    if (isFormPost(req)) {
      return this.jobToken(req, res, await this.formJobs.submit(req, res));
    }
    const applicationName = applicationNameOf(req);
    const mediaType = mediaTypeOf(req);
    const functionCallKind = KIND_OF_MEDIA_TYPE[mediaType];
    if (!functionCallKind && !ZIP_TYPES.has(mediaType)) {
      throw ApiError.unsupportedMediaType(
        mediaType
          ? `Content-Type ${mediaType} is not supported; send application/zip, application/xml or application/json.`
          : 'Content-Type is missing; send application/zip, application/xml or application/json.',
      );
    }
    const meta = parseMetaHeaders(rawHeaderPairs(req));
    const body = await getRawBody(req, { limit: this.config.maxRequestBytes });
    if (body.length === 0) {
      throw ApiError.badRequest(
        functionCallKind
          ? `The request body is empty; send the ${functionCallKind.toUpperCase()} payload of the function call.`
          : 'The request body is empty; send a ZIP archive.',
      );
    }
    if (functionCallKind && payloadText(body) === null) {
      throw ApiError.badRequest('The request body is not UTF-8 text.');
    }
    const job = functionCallKind
      ? await this.jobsService.submitFunctionCall(
          applicationName,
          functionCallKind,
          body,
          meta,
          'rest',
        )
      : await this.jobsService.submitZip(applicationName, body, meta, 'rest');
    return this.jobToken(req, res, job);
  }

  /** The 202 answer of a submission: the job token, and the result's URI in Location. */
  private jobToken(req: Request, res: Response, job: SubmittedJob): RestRepresentation {
    const links = new RestLinks(publicBaseUrl(req, this.config.publicBaseUrl));
    const resultUri = links.result(job.applicationName, job.jobId);
    res.setHeader('Location', resultUri);
    return {
      element: 'jobToken',
      value: {
        jobId: job.jobId,
        applicationName: job.applicationName,
        submissionTime: job.submissionTime,
        applicationResultsUri: links.applicationResults(job.applicationName),
        resultUri,
      },
    };
  }

  @All()
  @Access('public')
  otherOnJobs(@Req() req: Request): never {
    throw methodNotAllowed(req, ['POST']);
  }

  @Get(':app/:jobId')
  @Access('readResults')
  async status(
    @Req() req: Request,
    @Param('app', ApplicationNamePipe) applicationName: string,
    @Param('jobId', JobIdPipe) jobId: string,
  ): Promise<RestRepresentation> {
    const job = await this.jobs.findOne(applicationName, jobId);
    if (!job) {
      throw ApiError.notFound(`Application ${applicationName} has no job ${jobId}.`);
    }
    const links = new RestLinks(publicBaseUrl(req, this.config.publicBaseUrl));
    return {
      element: 'jobStatus',
      value: {
        jobId: job.id,
        applicationName: job.applicationName,
        state: job.state,
        submissionTime: job.submittedAt,
        startTime: job.state === JobState.QUEUED ? null : job.startedAt,
        finishTime: job.finishedAt,
        attempts: job.attempts,
        resultUri: links.result(job.applicationName, job.id),
      },
    };
  }

  @All(':app/:jobId')
  @Access('public')
  otherOnJob(@Req() req: Request): never {
    throw methodNotAllowed(req, ['GET', 'HEAD']);
  }
}
