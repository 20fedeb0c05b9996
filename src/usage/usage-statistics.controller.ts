import { Controller, Get, Query, Req } from '@nestjs/common';
import type { Request } from 'express';
import { ApiError } from '../common/api-error';
import { checkApplicationName } from '../common/application-name';
import { HttpAnswer } from '../common/http-answer';
import { RawData } from '../common/negotiation.guard';
import { renderRepresentation } from '../common/representation/rest-representation';
import { tableFormatOf } from '../common/table-format';
import { Access } from '../security/access.decorator';
import { MonthlyUsage, UsageRepository } from './usage.repository';
import { UsageStatisticsRepresentation } from './usage-view';

const MONTH = /^(\d{4})-(0[1-9]|1[0-2])$/;
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

/** Months are counted as year * 12 + month - 1. */
function monthIndex(value: string, name: string): number {
  const match = MONTH.exec(value);
  if (!match) {
    throw ApiError.badRequest(`${name} must be a month, YYYY-MM (got "${value.slice(0, 40)}").`);
  }
  return Number(match[1]) * 12 + Number(match[2]) - 1;
}

function monthText(index: number): string {
  return `${Math.floor(index / 12)}-${String((index % 12) + 1).padStart(2, '0')}`;
}

function monthStart(index: number): Date {
  return new Date(Date.UTC(Math.floor(index / 12), index % 12, 1));
}

function csvOf(months: MonthlyUsage[]): string {
  const lines = [CSV_COLUMNS.join(',')];
  for (const usage of months) {
    // Application names are letters, digits and underscores: nothing to quote.
    lines.push(CSV_COLUMNS.map((column) => String(usage[column] ?? '')).join(','));
  }
  return `${lines.join('\r\n')}\r\n`;
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
    const last =
      typeof to === 'string' ? monthIndex(to, 'to') : now.getUTCFullYear() * 12 + now.getUTCMonth();
    const first = typeof from === 'string' ? monthIndex(from, 'from') : last - DEFAULT_MONTHS + 1;
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
    const headers = { Vary: 'Accept', 'Content-Type': `${answer.type}; charset=utf-8` };
    if (answer.format === 'csv') {
      return new HttpAnswer(csvOf(months), {
        headers: {
          ...headers,
          'Content-Disposition': `attachment; filename="usage-${monthText(first)}-${monthText(last)}.csv"`,
        },
      });
    }
    const statistics = { from: monthText(first), to: monthText(last), months };
    return new HttpAnswer(
      renderRepresentation(new UsageStatisticsRepresentation(statistics), answer.format),
      { headers },
    );
  }
}
