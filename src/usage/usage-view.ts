import type { RestElement, RestView } from '../common/representation/rest-representation';

/** One application's usage in one calendar month (UTC); see docs/api.md for each figure. */
export interface UsageMonthView {
  application: string;
  /** YYYY-MM. */
  month: string;
  submitted: number;
  succeeded: number;
  failed: number;
  cancelled: number;
  runTimeTotalMs: number;
  runTimeP50Ms: number | null;
  runTimeP95Ms: number | null;
  /** Submission to start of the jobs that finished in the month (null: none had started). */
  waitTimeP50Ms: number | null;
  waitTimeP95Ms: number | null;
  rCpuTotalMs: number;
  rCpuJobs: number;
  bytesIn: number;
  bytesOut: number;
}

/** GET /admin/statistics: one entry per application and month (UTC), oldest month first. */
export interface UsageStatisticsView {
  /** YYYY-MM, inclusive. */
  from: string;
  to: string;
  months: UsageMonthView[];
}

/** `usageStatistics`: the months asked for, a `usage` per application and month. */
export class UsageStatisticsRepresentation implements RestView {
  constructor(private readonly view: UsageStatisticsView) {}

  toElement(): RestElement {
    return {
      name: 'usageStatistics',
      attributes: { from: this.view.from, to: this.view.to },
      lists: { usage: 'months' },
      // A month without started jobs has no run time percentiles: the attributes are left out.
      children: this.view.months.map((usage) => ({ name: 'usage', attributes: { ...usage } })),
    };
  }
}
