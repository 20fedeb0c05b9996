import { DataSource } from 'typeorm';
import { RunningService, startService } from '../../src/bootstrap';
import { loadConfig } from '../../src/config/app-config';
import { PinoLoggerService } from '../../src/common/pino-logger';
import { FIRE_ATTEMPTS } from '../../src/schedules/schedule-ticker.service';
import { ADMIN_AUTHORIZATION, ADMIN_ENV } from '../support/admin-auth';
import { request, REST } from '../support/rest-client';
import {
  createTestDatabase,
  TestDatabase,
  testEnvironment,
  waitFor,
} from '../support/test-service';

/**
 * A poison state is not retried in a loop: a schedule whose catch-up run, at start, cannot be
 * stored (the database refuses the job: a trigger here, on the real database) is tried
 * FIRE_ATTEMPTS times, then recorded as failed, and its clock moves past the missed times.
 */
const APP = { 'X-SVC-Application-Name': 'planner' };
const ADMIN = { ...APP, Authorization: ADMIN_AUTHORIZATION, Accept: 'application/json' };

describe('schedules: a catch-up run that fails at start', () => {
  let database: TestDatabase;
  let service: RunningService | null = null;

  const start = async (): Promise<string> => {
    const config = loadConfig(testEnvironment(database, ADMIN_ENV));
    service = await startService(config, new PinoLoggerService(config.logLevel));
    return service.url ?? '';
  };
  const query = <T>(sql: string, params: unknown[] = []): Promise<T[]> =>
    service!.app.get(DataSource).query<T[]>(sql, params);

  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    await service?.close();
    await database.drop();
  });

  it('is tried FIRE_ATTEMPTS times, then recorded as failed with the reason, and not again', async () => {
    let base = await start();
    const script = await request(`${base}${REST}/admin/catalog/R_SCRIPTS/tick.R`, {
      method: 'PUT',
      headers: ADMIN,
      body: 'writeLines("tick", "out.txt")\n',
    });
    expect(script.status).toBe(201);
    // Hourly, half an hour away from now: no planned time falls into the test.
    const minute = (new Date().getUTCMinutes() + 30) % 60;
    const created = await request(`${base}${REST}/admin/schedules`, {
      method: 'POST',
      headers: { ...ADMIN, 'Content-Type': 'application/json' },
      body: JSON.stringify({
        name: 'poisoned',
        cron: `0 ${minute} * * * *`,
        job: { rScript: 'tick.R' },
      }),
    });
    expect(created.status).toBe(201);
    const { id, selfUri } = JSON.parse(created.text) as { id: string; selfUri: string };
    // The database refuses this application's jobs; each attempt is counted outside the
    // transactions it aborts (a sequence is not rolled back).
    await query('CREATE SEQUENCE poison_attempts');
    await query(`CREATE FUNCTION poison_job() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM nextval('poison_attempts');
        RAISE EXCEPTION 'no job of planner may be stored';
      END $$`);
    await query(`CREATE TRIGGER poison_job BEFORE INSERT ON job FOR EACH ROW
      WHEN (NEW.application_name = 'planner') EXECUTE FUNCTION poison_job()`);
    await service!.close();
    service = null;
    // While the node is down: the schedule's clock five hours back, as after an outage.
    base = await start();
    await query(`UPDATE schedule SET covered_until = now() - interval '5 hours' WHERE id = $1`, [
      id,
    ]);
    await service!.close();
    service = null;
    base = await start();

    const lastRun = await waitFor(
      async () => {
        const view = await request(selfUri.replace(/^https?:\/\/[^/]+/, base), { headers: ADMIN });
        return (
          JSON.parse(view.text) as {
            lastRun: { jobId: string | null; error: string | null; plannedTime: string } | null;
          }
        ).lastRun;
      },
      60_000,
      'the catch-up run recorded',
    );
    expect(lastRun.jobId).toBeNull();
    expect(lastRun.error).toContain(`the job could not be stored after ${FIRE_ATTEMPTS} attempts`);
    expect(lastRun.error).toContain('no job of planner may be stored');
    const [attempts] = await query<{ n: string }>('SELECT last_value AS n FROM poison_attempts');
    expect(Number(attempts.n)).toBe(FIRE_ATTEMPTS);
    // The clock is past the missed times, so no pass plans them again; the run is kept.
    const [row] = await query<{ covered: Date }>(
      'SELECT covered_until AS covered FROM schedule WHERE id = $1',
      [id],
    );
    expect(row.covered.getTime()).toBeGreaterThanOrEqual(Date.parse(lastRun.plannedTime));
    const runs = await query<{ error: string | null; job_id: string | null }>(
      'SELECT error, job_id FROM schedule_run WHERE schedule_id = $1',
      [id],
    );
    expect(runs).toEqual([{ error: lastRun.error, job_id: null }]);
    expect(await query('SELECT id FROM job')).toEqual([]);
  }, 180_000);
});
