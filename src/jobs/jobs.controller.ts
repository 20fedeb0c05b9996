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
import { CallbackRepository } from '../callbacks/callback.repository';
import { CallbackState } from '../callbacks/job-callback.entity';
import { isFormPost } from '../common/form-post';
import { publicBaseUrl, RestLinks } from '../common/public-uri';
import { RestView } from '../common/representation/rest-representation';
import { Access } from '../security/access.decorator';
import { FormJobService } from './form-job.service';
import { JobRecordsRepository } from '../queue/job-records.repository';
import { JobsService, SubmittedJob } from './jobs.service';
import { readRestSubmission } from './rest-submission';
import { JobEntity } from '../queue/job.entity';
import { JobState } from '../queue/queue.types';
import { JobCancellationService } from './job-cancellation.service';
import { JobStatusRepresentation, jobTokenOf } from './jobs-view';
import { principalOf } from '../security/principal';
import { JobWaiter } from '../queue/job-waiter.service';
import { ClientGone, waitMilliseconds } from '../common/wait-parameter';
import { HttpAnswer } from '../common/http-answer';
import { missing } from '../common/missing-resource';

@RendersRepresentations()
@Controller('svc/api/rest/jobs')
export class JobsController {
  constructor(
    private readonly config: RestApiConfig,
    private readonly jobsService: JobsService,
    private readonly jobs: JobRecordsRepository,
    private readonly formJobs: FormJobService,
    private readonly cancellation: JobCancellationService,
    private readonly waiter: JobWaiter,
    private readonly callbacks: CallbackRepository,
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
    const seenState = stateToWaitIn(whileParameter, waitMs !== null);
    const job = await this.existingJob(applicationName, jobId);
    const heldState = seenState ?? job.state;
    if (waitMs === null || job.state === JobState.DONE || job.state !== heldState) {
      return await this.jobStatus(req, job);
    }
    // `?wait=N`: answers when the state changes (the job starts or ends), else after N seconds.
    // `&while=S` names the state the client saw last, so that a change between its two requests
    // is answered at once instead of being waited past.
    const changed = await this.waiter.waitFor(
      jobId,
      async () => {
        const now = await this.jobs.findOne(applicationName, jobId);
        return now === null || now.state !== heldState ? { now } : null;
      },
      waitMs,
      { events: 'result-or-start', signal: clientGone },
    );
    return await this.jobStatus(req, await this.existingJob(applicationName, jobId, changed?.now));
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
        return new HttpAnswer(
          await this.jobStatus(req, await this.existingJob(applicationName, jobId)),
          { status: HttpStatus.ACCEPTED },
        );
    }
  }

  /** The job, or 404; `known` is what the caller has just read (null: gone), undefined: look. */
  private async existingJob(
    applicationName: string,
    jobId: string,
    known?: JobEntity | null,
  ): Promise<JobEntity> {
    const job = known !== undefined ? known : await this.jobs.findOne(applicationName, jobId);
    if (!job) {
      throw missing.job(applicationName, jobId);
    }
    return job;
  }

  private async jobStatus(req: Request, job: JobEntity): Promise<RestView> {
    const links = new RestLinks(publicBaseUrl(req, this.config.publicBaseUrl));
    // The delivery row is made when the job ends; until then its callback is pending, untried.
    const callback =
      job.callbackUrl === null
        ? null
        : ((await this.callbacks.findStatus(job.id)) ?? {
            state: CallbackState.PENDING,
            attempts: 0,
            lastHttpStatus: null,
            lastError: null,
            lastAttemptTime: null,
            deliveryTime: null,
          });
    return new JobStatusRepresentation({
      jobId: job.id,
      applicationName: job.applicationName,
      state: job.state,
      submissionTime: job.submittedAt,
      startTime: job.state === JobState.QUEUED ? null : job.startedAt,
      finishTime: job.finishedAt,
      attempts: job.attempts,
      resultUri: links.result(job.applicationName, job.id),
      cancellation:
        job.cancelledAt && job.cancelledBy !== null
          ? { by: job.cancelledBy, time: job.cancelledAt }
          : null,
      progress:
        job.progressFraction !== null
          ? { fraction: job.progressFraction, message: job.progressMessage ?? '' }
          : null,
      callback,
    });
  }
}

/** The `while` query parameter of a job status wait: a job state, and only beside `wait`. */
function stateToWaitIn(value: unknown, waiting: boolean): JobState | null {
  if (value === undefined) {
    return null;
  }
  if (!waiting) {
    throw ApiError.badRequest('while is only used with wait.');
  }
  const states: readonly unknown[] = Object.values(JobState);
  if (!states.includes(value)) {
    throw ApiError.badRequest(`while must be one of ${Object.values(JobState).join(', ')}.`);
  }
  return value as JobState;
}
