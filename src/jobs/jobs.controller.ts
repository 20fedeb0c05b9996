import {
  Controller,
  Delete,
  Get,
  HttpCode,
  HttpStatus,
  Param,
  Post,
  Query,
  Req,
  UseGuards,
} from '@nestjs/common';
import { RendersRepresentations } from '../common/representation.interceptor';
import type { Request } from 'express';
import { RestApiConfig } from '../config/config-slices';
import { ApiError } from '../common/api-error';
import { ApplicationNameGuard, ApplicationNamePipe, JobIdPipe } from '../common/application-name';
import { isFormPost } from '../common/form-post';
import { publicBaseUrl, RestLinks } from '../common/public-uri';
import { RestView } from '../common/representation/rest-representation';
import { Access } from '../security/access.decorator';
import { FormJobService } from './form-job.service';
import { JobsService, SubmittedJob } from './jobs.service';
import { readRestSubmission } from './rest-submission';
import { JobState } from '../queue/queue.types';
import { JobCancellationService } from './job-cancellation.service';
import { jobTokenOf } from './jobs-view';
import { JobStatusService } from './job-status.service';
import { principalOf } from '../security/principal';
import { choiceParameter, ClientGone, waitMilliseconds } from '../common/query-parameters';
import { HttpAnswer } from '../common/http-answer';
import { missing } from '../common/missing-resource';

@RendersRepresentations()
@Controller('svc/api/rest/jobs')
export class JobsController {
  constructor(
    private readonly config: RestApiConfig,
    private readonly jobsService: JobsService,
    private readonly formJobs: FormJobService,
    private readonly cancellation: JobCancellationService,
    private readonly statuses: JobStatusService,
  ) {}

  @Post()
  @Access('submitJob')
  @HttpCode(202)
  @UseGuards(ApplicationNameGuard)
  async submit(@Req() req: Request): Promise<HttpAnswer> {
    // A form post (the upload page) is read by FormJobService; any other body by its media type.
    const job = isFormPost(req)
      ? await this.formJobs.submit(req)
      : await this.jobsService.submit(await readRestSubmission(req, this.config));
    return this.jobToken(req, job);
  }

  /** The 202 answer of a submission: the job token, and the result's URI in Location. */
  private jobToken(req: Request, job: SubmittedJob): HttpAnswer {
    const { token, resultUri } = jobTokenOf(publicBaseUrl(req, this.config.publicBaseUrl), job);
    return new HttpAnswer(token, { headers: { Location: resultUri } });
  }

  @Get(':app/:jobId')
  @Access('readResults')
  async status(
    @Req() req: Request,
    @ClientGone() clientGone: AbortSignal,
    @Param('app', ApplicationNamePipe) applicationName: string,
    @Param('jobId', JobIdPipe) jobId: string,
    @Query('wait') wait?: unknown,
    @Query('while') whileParameter?: unknown,
  ): Promise<RestView> {
    const waitMs = waitMilliseconds(wait, this.config.resultWaitMaxSeconds);
    if (whileParameter !== undefined && waitMs === null) {
      throw ApiError.badRequest('while is only used with wait.');
    }
    const seenState = choiceParameter(whileParameter, 'while', Object.values(JobState));
    return await this.statuses.status(this.links(req), applicationName, jobId, {
      waitMs,
      seenState,
      signal: clientGone,
    });
  }

  /**
   * Cancels a job (docs/api.md): 204 when it was queued (it will never run), 202 with its
   * jobStatus when it was running (its result is stored; its node is stopping R), 409 when it had
   * finished already.
   */
  @Delete(':app/:jobId')
  @Access('cancelJob')
  async cancel(
    @Req() req: Request,
    @Param('app', ApplicationNamePipe) applicationName: string,
    @Param('jobId', JobIdPipe) jobId: string,
  ): Promise<HttpAnswer> {
    const outcome = await this.cancellation.cancel(
      applicationName,
      jobId,
      principalOf(req)?.id ?? null,
    );
    switch (outcome) {
      case 'unknown':
        throw missing.job(applicationName, jobId);
      case 'finished':
        throw new ApiError(
          HttpStatus.CONFLICT,
          `Job ${jobId} of application ${applicationName} has finished already; delete its result instead.`,
        );
      case 'stopped':
        return new HttpAnswer(null, { status: HttpStatus.NO_CONTENT });
      case 'stopping':
        return new HttpAnswer(await this.statuses.status(this.links(req), applicationName, jobId), {
          status: HttpStatus.ACCEPTED,
        });
    }
  }

  private links(req: Request): RestLinks {
    return new RestLinks(publicBaseUrl(req, this.config.publicBaseUrl));
  }
}
