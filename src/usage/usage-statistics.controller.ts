import { All, Controller, Get, Query, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { ApiError } from '../common/api-error';
import { checkApplicationName } from '../common/application-name';
import { methodNotAllowed } from '../common/method-not-allowed';
import { tableFormatOf } from '../common/table-format';
import { RawData } from '../common/negotiation.guard';
import { renderRepresentation } from '../common/representation/rest-representation';
import { Access } from '../security/access.decorator';
import { MonthlyUsage, UsageRepository } from './usage.repository';

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
    @Res() res: Response,
    @Query('application') application: string | undefined,
    @Query('from') from: string | undefined,
    @Query('to') to: string | undefined,
    @Query('format') format: string | undefined,
  ): Promise<void> {
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
    res.status(200).setHeader('Vary', 'Accept');
    if (answer.format === 'csv') {
      res
        .type('text/csv; charset=utf-8')
        .setHeader(
          'Content-Disposition',
          `attachment; filename="usage-${monthText(first)}-${monthText(last)}.csv"`,
        )
        .send(csvOf(months));
      return;
    }
    res.type(`${answer.type}; charset=utf-8`).send(
      renderRepresentation(
        {
          element: 'usageStatistics',
          value: { from: monthText(first), to: monthText(last), months },
        },
        answer.format,
      ),
    );
  }

  @All('statistics')
  @Access('public')
  otherOnStatistics(@Req() req: Request): never {
    throw methodNotAllowed(req, ['GET', 'HEAD']);
  }
}
