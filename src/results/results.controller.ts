import { Access } from '../security/access.decorator';
import { All, Controller, Delete, Get, HttpCode, Param, Query, Req, Res } from '@nestjs/common';
import { RendersRepresentations } from '../common/representation.interceptor';
import type { Request, Response } from 'express';
import { AppConfig } from '../config/app-config';
import { ApiError } from '../common/api-error';
import { ApplicationNamePipe, isJobId, JobIdPipe } from '../common/application-name';
import { methodNotAllowed } from '../common/method-not-allowed';
import { formatOf } from '../common/negotiation';
import { RawData } from '../common/negotiation.guard';
import { publicBaseUrl, RestLinks } from '../common/public-uri';
import {
  RestRepresentation,
  ResultsStreamWriter,
} from '../common/representation/rest-representation';
import { resultView } from './result-view';
import { ResultMetadata, ResultRepository } from './result.repository';
import { JobWaiter } from '../queue/job-waiter.service';
import { clientGoneSignal, waitMilliseconds } from '../common/wait-parameter';
import { sendResultData } from './result-data.response';
import { malformed, missing } from '../common/missing-resource';

/** Results are read in pages of this size when listed whole, so the list is never all in memory. */
const LIST_PAGE_SIZE = 500;

function parsePaging(value: string | undefined, name: string): number | undefined {
  if (value === undefined) {
    return undefined;
  }
  if (!/^\d{1,9}$/.test(value)) {
    throw ApiError.badRequest(`${name} must be a non-negative whole number.`);
  }
  return Number(value);
}

@RendersRepresentations()
@Controller('svc/api/rest')
@Access('readResults')
export class ResultsController {
  constructor(
    private readonly config: AppConfig,
    private readonly results: ResultRepository,
    private readonly waiter: JobWaiter,
  ) {}

  private links(req: Request): RestLinks {
    return new RestLinks(publicBaseUrl(req, this.config.publicBaseUrl));
  }

  @Get('results/:app')
  async list(
    @Req() req: Request,
    @Res() res: Response,
    @Param('app', ApplicationNamePipe) applicationName: string,
    @Query('limit') limitParam?: string,
    @Query('offset') offsetParam?: string,
  ): Promise<void> {
    const limit = parsePaging(limitParam, 'limit');
    const offset = parsePaging(offsetParam, 'offset') ?? 0;
    const links = this.links(req);
    const { format, mediaType } = formatOf(req);
    // Read the first page before answering, so a database failure is still a clean 503.
    let page = await this.results.page(
      applicationName,
      Math.min(limit ?? LIST_PAGE_SIZE, LIST_PAGE_SIZE),
      null,
      offset,
    );
    res.status(200).type(`${mediaType}; charset=utf-8`).vary('Accept');
    const writer = new ResultsStreamWriter(format, (chunk) => res.write(chunk));
    let remaining = limit ?? Number.POSITIVE_INFINITY;
    try {
      while (page.length > 0 && remaining > 0) {
        for (const result of page.slice(0, remaining)) {
          writer.add(resultView(links, result));
        }
        remaining -= page.length;
        if (page.length < LIST_PAGE_SIZE || remaining <= 0) {
          break;
        }
        const last = page[page.length - 1];
        page = await this.results.page(applicationName, Math.min(remaining, LIST_PAGE_SIZE), last);
      }
      writer.end();
      res.end();
    } catch {
      // Headers are gone: cut the answer so the client sees an incomplete body, not a short list.
      res.destroy();
    }
  }

  @All('results/:app')
  otherOnList(@Req() req: Request): never {
    throw methodNotAllowed(req, ['GET', 'HEAD']);
  }

  /** `?wait=N`: answers as soon as the result is stored, else as without it after N seconds. */
  @Get('results/:app/:jobId')
  async metadata(
    @Req() req: Request,
    @Res({ passthrough: true }) res: Response,
    @Param('app', ApplicationNamePipe) applicationName: string,
    @Param('jobId', JobIdPipe) jobId: string,
    @Query('wait') wait?: unknown,
  ): Promise<RestRepresentation> {
    const waitMs = waitMilliseconds(wait, this.config.resultWaitMaxSeconds);
    const find = (): Promise<ResultMetadata | null> =>
      this.results.findMetadata(applicationName, jobId);
    const result =
      waitMs === null
        ? await find()
        : await this.waiter.waitFor(jobId, find, waitMs, { signal: clientGoneSignal(res) });
    if (!result) {
      throw missing.pendingResult(applicationName, jobId);
    }
    return { element: 'result', value: resultView(this.links(req), result) };
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

  @All('results/:app/:jobId')
  otherOnResult(@Req() req: Request): never {
    throw methodNotAllowed(req, ['GET', 'HEAD', 'DELETE']);
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

  @All('result/:app/:file')
  otherOnData(@Req() req: Request): never {
    throw methodNotAllowed(req, ['GET', 'HEAD']);
  }
}
