import { Controller, Get, Query, Req } from '@nestjs/common';
import type { Request } from 'express';
import { ApiError } from '../common/api-error';
import { checkApplicationName } from '../common/application-name';
import { HttpAnswer } from '../common/http-answer';
import { RawData } from '../common/negotiation.guard';
import { renderRepresentation } from '../common/representation/rest-representation';
import { csvTable, tableAnswer, tableFormatOf } from '../common/table-format';
import { monthParameter } from '../common/query-parameters';
import { Access } from '../security/access.decorator';
import { MonthlyUsage, UsageRepository } from './usage.repository';
import { UsageStatisticsRepresentation } from './usage-view';

/** The longest period one request may cover. */
const MAX_MONTHS = 120;
/** Without `from`, the twelve months up to `to`. */
const DEFAULT_MONTHS = 12;

const CSV_COLUMNS: Array<keyof MonthlyUsage> = [
  'application',
  'month',
  'submitted',
  'succeeded',
  'failed',
  'cancelled',
  'runTimeTotalMs',
  'runTimeP50Ms',
  'runTimeP95Ms',
  'waitTimeP50Ms',
  'waitTimeP95Ms',
  'rCpuTotalMs',
  'rCpuJobs',
  'bytesIn',
  'bytesOut',
];

/** Months are counted as year * 12 + month - 1 (`monthParameter`). */
function monthText(index: number): string {
  return `${Math.floor(index / 12)}-${String((index % 12) + 1).padStart(2, '0')}`;
}

function monthStart(index: number): Date {
  return new Date(Date.UTC(Math.floor(index / 12), index % 12, 1));
}

/**
 * Usage statistics per application and month (GET /admin/statistics): global admins for every
 * application, an application's admins for theirs (`?application=`). XML, JSON or CSV.
 */
@Controller('svc/api/rest/admin')
export class UsageStatisticsController {
  constructor(private readonly usage: UsageRepository) {}

  @Get('statistics')
  @Access('usageStatistics')
  @RawData()
  async statistics(
    @Req() req: Request,
    @Query('application') application: string | undefined,
    @Query('from') from: string | undefined,
    @Query('to') to: string | undefined,
    @Query('format') format: string | undefined,
  ): Promise<HttpAnswer> {
    const answer = tableFormatOf(req, typeof format === 'string' ? format : undefined);
    const now = new Date();
    const last = monthParameter(to, 'to') ?? now.getUTCFullYear() * 12 + now.getUTCMonth();
    const first = monthParameter(from, 'from') ?? last - DEFAULT_MONTHS + 1;
    if (first > last) {
      throw ApiError.badRequest(`from (${monthText(first)}) is after to (${monthText(last)}).`);
    }
    if (last - first + 1 > MAX_MONTHS) {
      throw ApiError.badRequest(`A request covers at most ${MAX_MONTHS} months.`);
    }
    const months = await this.usage.monthly({
      from: monthStart(first),
      until: monthStart(last + 1),
      application:
        typeof application === 'string' && application !== ''
          ? checkApplicationName(application, 'The application parameter')
          : null,
    });
    const body =
      answer.format === 'csv'
        ? csvTable(CSV_COLUMNS, months)
        : renderRepresentation(
            new UsageStatisticsRepresentation({
              from: monthText(first),
              to: monthText(last),
              months,
            }),
            answer.format,
          );
    return tableAnswer(answer, body, `usage-${monthText(first)}-${monthText(last)}.csv`);
  }
}
