import { Access } from '../security/access.decorator';
import { Controller, Delete, Get, HttpCode, Param, Query, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { HttpAnswer } from '../common/http-answer';
import { RendersRepresentations } from '../common/representation.interceptor';
import { RestApiConfig } from '../config/config-slices';
import { ApplicationNamePipe, isJobId, JobIdPipe } from '../common/application-name';
import { formatOf } from '../common/negotiation';
import { RawData } from '../common/negotiation.guard';
import { publicBaseUrl, RestLinks } from '../common/public-uri';
import { RestView } from '../common/representation/rest-representation';
import { resultListing } from './result-listing';
import { ResultRepresentation, resultView } from './result-view';
import { ResultMetadata, ResultRepository } from './result.repository';
import { JobWaiter } from '../queue/job-waiter.service';
import { ClientGone, pagingNumber, waitMilliseconds } from '../common/query-parameters';
import { sendResultData } from './result-data.response';
import { malformed, missing } from '../common/missing-resource';

@RendersRepresentations()
@Controller('svc/api/rest')
@Access('readResults')
export class ResultsController {
  constructor(
    private readonly config: RestApiConfig,
    private readonly results: ResultRepository,
    private readonly waiter: JobWaiter,
  ) {}

  private links(req: Request): RestLinks {
    return new RestLinks(publicBaseUrl(req, this.config.publicBaseUrl));
  }

  /** The list is streamed as it is read (`resultListing`). */
  @Get('results/:app')
  async list(
    @Req() req: Request,
    @Param('app', ApplicationNamePipe) applicationName: string,
    @Query('limit') limitParam?: string,
    @Query('offset') offsetParam?: string,
  ): Promise<HttpAnswer> {
    const { format, mediaType } = formatOf(req);
    const listing = await resultListing(this.results, {
      applicationName,
      limit: pagingNumber(limitParam, 'limit'),
      offset: pagingNumber(offsetParam, 'offset') ?? 0,
      links: this.links(req),
      format,
    });
    return new HttpAnswer(listing, {
      headers: { 'Content-Type': `${mediaType}; charset=utf-8`, Vary: 'Accept' },
    });
  }

  /** `?wait=N`: answers as soon as the result is stored, else as without it after N seconds. */
  @Get('results/:app/:jobId')
  async metadata(
    @Req() req: Request,
    @ClientGone() clientGone: AbortSignal,
    @Param('app', ApplicationNamePipe) applicationName: string,
    @Param('jobId', JobIdPipe) jobId: string,
    @Query('wait') wait?: unknown,
  ): Promise<RestView> {
    const waitMs = waitMilliseconds(wait, this.config.resultWaitMaxSeconds);
    const find = (): Promise<ResultMetadata | null> =>
      this.results.findMetadata(applicationName, jobId);
    const result =
      waitMs === null
        ? await find()
        : await this.waiter.waitFor(jobId, find, waitMs, { signal: clientGone });
    if (!result) {
      throw missing.pendingResult(applicationName, jobId);
    }
    return new ResultRepresentation(resultView(this.links(req), result));
  }

  @Delete('results/:app/:jobId')
  @HttpCode(204)
  async delete(
    @Param('app', ApplicationNamePipe) applicationName: string,
    @Param('jobId', JobIdPipe) jobId: string,
  ): Promise<void> {
    if (!(await this.results.delete(applicationName, jobId))) {
      throw missing.result(applicationName, jobId);
    }
  }

  @Get('result/:app/:file')
  @RawData()
  async data(
    @Req() req: Request,
    @Res() res: Response,
    @Param('app', ApplicationNamePipe) applicationName: string,
    @Param('file') file: string,
  ): Promise<void> {
    const dot = file.lastIndexOf('.');
    const jobId = dot < 0 ? file : file.slice(0, dot);
    if (!isJobId(jobId)) {
      throw malformed.resultFile(file);
    }
    const result = await this.results.findDataSource(applicationName, jobId.toLowerCase());
    if (!result || dot < 0 || file.slice(dot + 1) !== result.type) {
      throw missing.resultData(req.path);
    }
    await sendResultData(req, res, result);
  }
}
