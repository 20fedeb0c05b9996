import { apiErrorOf, controllerOf, fakeRequest } from '../../test/support/controller-testing';
import { UsageStatisticsController } from './usage-statistics.controller';
import { MonthlyUsage, UsageRepository } from './usage.repository';

const MONTH: MonthlyUsage = {
  application: 'app',
  month: '2026-10',
  submitted: 3,
  succeeded: 2,
  failed: 1,
  cancelled: 0,
  runTimeTotalMs: 900,
  runTimeP50Ms: 300,
  runTimeP95Ms: null,
  waitTimeP50Ms: 10,
  waitTimeP95Ms: null,
  rCpuTotalMs: 800,
  rCpuJobs: 2,
  bytesIn: 100,
  bytesOut: 200,
};

describe('UsageStatisticsController', () => {
  let monthly: jest.Mock;
  let controller: UsageStatisticsController;

  beforeEach(async () => {
    monthly = jest.fn().mockResolvedValue([MONTH]);
    controller = await controllerOf(UsageStatisticsController, [
      { provide: UsageRepository, useValue: { monthly } },
    ]);
  });

  const get = (
    query: { application?: string; from?: string; to?: string; format?: string },
    headers: Record<string, string> = {},
  ) =>
    controller.statistics(
      fakeRequest({ headers }),
      query.application,
      query.from,
      query.to,
      query.format,
    );

  it('asks for the months from the first of `from` to the first after `to`', async () => {
    await get({ application: 'app', from: '2025-11', to: '2026-10' });
    expect(monthly).toHaveBeenCalledWith({
      from: new Date('2025-11-01T00:00:00Z'),
      until: new Date('2026-11-01T00:00:00Z'),
      application: 'app',
    });
  });

  it('covers the twelve months up to `to` without `from`, every application without one', async () => {
    await get({ to: '2026-03' });
    expect(monthly).toHaveBeenCalledWith({
      from: new Date('2025-04-01T00:00:00Z'),
      until: new Date('2026-04-01T00:00:00Z'),
      application: null,
    });
  });

  it('sends CSV as a download named by its months, empty cells for nulls', async () => {
    const answer = await get({ from: '2026-10', to: '2026-10', format: 'csv' });
    expect(answer.headers).toEqual({
      Vary: 'Accept',
      'Content-Type': 'text/csv; charset=utf-8',
      'Content-Disposition': 'attachment; filename="usage-2026-10-2026-10.csv"',
    });
    expect((answer.body as string).split('\r\n')[1]).toBe(
      'app,2026-10,3,2,1,0,900,300,,10,,800,2,100,200',
    );
  });

  it('answers plain JSON for Accept: application/json', async () => {
    const answer = await get({ from: '2026-10', to: '2026-10' }, { Accept: 'application/json' });
    expect(answer.headers['Content-Type']).toBe('application/json; charset=utf-8');
    expect(JSON.parse(answer.body as string)).toEqual({
      from: '2026-10',
      to: '2026-10',
      // Absent figures are left out of the representation.
      months: [{ ...MONTH, runTimeP95Ms: undefined, waitTimeP95Ms: undefined }],
    });
  });

  it.each([
    [{ from: '2026-13' }, 'from must be a month, YYYY-MM (got "2026-13").'],
    [{ from: '2026-05', to: '2026-04' }, 'from (2026-05) is after to (2026-04).'],
    [{ from: '2000-01', to: '2026-01' }, 'A request covers at most 120 months.'],
    [{ application: 'a b' }, 'The application parameter'],
  ])('answers 400 for %j', async (query, message) => {
    const error = await apiErrorOf(() => get(query));
    expect(error.status).toBe(400);
    expect(error.message).toContain(message);
    expect(monthly).not.toHaveBeenCalled();
  });
});
