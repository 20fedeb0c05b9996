import { createHmac } from 'node:crypto';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { RunningService, startService } from '../../src/bootstrap';
import { loadConfig } from '../../src/config/app-config';
import { PinoLoggerService } from '../../src/common/pino-logger';
import { EmbeddedPostgres } from '../../src/storage/embedded-postgres';
import {
  ADMIN_AUTHORIZATION,
  ADMIN_ENV,
  ALICE,
  basicUsersEnvironment,
  BOB,
  ROOT,
} from '../support/admin-auth';
import { Receiver } from '../support/callback-receiver';
import { ReceivedMail, SmtpRecorder, startSmtpRecorder } from '../support/smtp-recorder';
import { Answer, request, REST, waitForResult } from '../support/rest-client';
import { ServiceProcess, spawnNodes } from '../support/service-process';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  sleep,
  startTestService,
  TestDatabase,
  testEnvironment,
  TestService,
  waitFor,
} from '../support/test-service';

const SECRET = 'schedule-callback-secret-1';
const APP = { 'X-SVC-Application-Name': 'planner' };
const TICK_SCRIPT = 'writeLines(readLines("configuration.txt"), "seen.txt")\n';

interface ScheduleView {
  id: string;
  application: string;
  name: string;
  cron: string;
  timeZone: string;
  job: Record<string, unknown>;
  catchUp: string;
  callbackUrl: string | null;
  email: { to: string[]; cc: string[]; subject: string } | null;
  paused: boolean;
  nextRunTime: string | null;
  lastRun: {
    plannedTime: string;
    time: string | null;
    jobId: string | null;
    jobUri: string | null;
    error: string | null;
  } | null;
  createdTime: string;
  selfUri: string;
}

/** An admin-API request for application planner (not in the example catalog), JSON body when given. */
async function admin(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  return request(`${base}${REST}/admin/schedules${path}`, {
    method,
    headers: {
      ...APP,
      Authorization: ADMIN_AUTHORIZATION,
      Accept: 'application/json',
      ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
      ...headers,
    },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
}

async function putCatalogScript(base: string, name: string, script: string): Promise<void> {
  const answer = await request(`${base}${REST}/admin/catalog/R_SCRIPTS/${name}`, {
    method: 'PUT',
    headers: { ...APP, Authorization: ADMIN_AUTHORIZATION },
    body: script,
  });
  expect([201, 204]).toContain(answer.status);
}

async function created(base: string, definition: Record<string, unknown>): Promise<ScheduleView> {
  const answer = await admin(base, 'POST', '', definition);
  expect(answer.status).toBe(201);
  const schedule = JSON.parse(answer.text) as ScheduleView;
  expect(answer.headers.get('location')).toBe(schedule.selfUri);
  return schedule;
}

async function scheduleOf(base: string, id: string): Promise<ScheduleView> {
  const answer = await admin(base, 'GET', `/${id}`);
  expect(answer.status).toBe(200);
  return JSON.parse(answer.text) as ScheduleView;
}

/** The message of an error answer (plain JSON, as application/json asks for). */
function messageOf(answer: Answer): string {
  return (JSON.parse(answer.text) as { message: string }).message;
}

describe('schedules: the admin API', () => {
  let service: TestService;
  let dataSource: DataSource;
  let receiver: Receiver;

  beforeAll(async () => {
    receiver = await new Receiver().start();
    service = await startTestService({
      ...ADMIN_ENV,
      APPLICATION_SETTINGS: JSON.stringify({
        planner: { callbackHosts: ['127.0.0.1'], callbackSecret: SECRET },
      }),
    });
    dataSource = service.app.get(DataSource);
    await putCatalogScript(service.url, 'tick.R', TICK_SCRIPT);
  });
  afterAll(async () => {
    await service.stop();
    await receiver.stop();
  });

  const definition = (overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
    name: 'report',
    cron: '0 30 6 * * 1-5',
    timeZone: 'Europe/Berlin',
    job: { rScript: 'tick.R', meta: { region: 'north' } },
    catchUp: 'skip',
    ...overrides,
  });

  it('refuses a bad cron expression or time zone with a 400 that names it', async () => {
    const badCron = await admin(service.url, 'POST', '', definition({ cron: '61 * * * *' }));
    expect(badCron.status).toBe(400);
    expect(messageOf(badCron)).toMatch(/^cron "61 \* \* \* \*" is not a valid cron expression/);

    const never = await admin(service.url, 'POST', '', definition({ cron: '0 0 0 30 2 *' }));
    expect(never.status).toBe(400);
    expect(messageOf(never)).toContain('cron "0 0 0 30 2 *" never fires');

    const badZone = await admin(
      service.url,
      'POST',
      '',
      definition({ timeZone: 'Europe/Atlantis' }),
    );
    expect(badZone.status).toBe(400);
    expect(messageOf(badZone)).toContain('timeZone "Europe/Atlantis" is not an IANA time zone');
  });

  it('validates the JSON body, the catalog script, the application and the callback URL', async () => {
    const cases: Array<[unknown, number, RegExp, Record<string, string>?]> = [
      ['{"name": ', 400, /The body is not JSON/],
      [[], 400, /must be a JSON object/],
      [definition({ extra: 1 }), 400, /Unknown fields: extra/],
      [definition({ name: '' }), 400, /name is required/],
      [definition({ catchUp: 'always' }), 400, /catchUp must be "runOnce" or "skip"/],
      [definition({ paused: 'yes' }), 400, /paused must be true or false/],
      [definition({ job: { rScript: '../x.R' } }), 400, /not a plain catalog file name/],
      [definition({ job: { rScript: 'nope.R' } }), 400, /no catalog script R_SCRIPTS\/nope.R/],
      [definition({ job: { rScript: 'tick.R', meta: { n: 1 } } }), 400, /"n" must be a string/],
      [
        definition({ job: { rScript: 'tick.R', meta: { scheduleId: 'x' } } }),
        400,
        /set by the schedule itself/,
      ],
      [definition({ job: { functionCall: 'csv', payload: '1' } }), 400, /"json" or "xml"/],
      [definition({ job: { functionCall: 'json', payload: '{}' } }), 400, /no R_FUNCTIONS/],
      // What R cannot hold is refused when the schedule is defined, not at every tick.
      [
        definition({ job: { functionCall: 'json', payload: '"a\u0000b"' } }),
        400,
        /job.payload holds a NUL/,
      ],
      [
        definition({ job: { rScript: 'tick.R', meta: { n: 'a\u0000b' } } }),
        400,
        /meta parameter "n" .* holds a NUL/,
      ],
      [definition({ application: 'other' }), 400, /differs from the X-SVC-Application-Name/],
      [definition({ callbackUrl: 'ftp://127.0.0.1/x' }), 400, /^callbackUrl must be an http/],
      [
        definition({ callbackUrl: 'http://192.0.2.1/hook' }),
        400,
        /callback host 192.0.2.1 is not on the callback hosts/,
      ],
      [
        definition(),
        404,
        /Application nowhere is unknown/,
        { 'X-SVC-Application-Name': 'nowhere' },
      ],
    ];
    for (const [body, status, message, headers] of cases) {
      const answer = await admin(service.url, 'POST', '', body, headers);
      expect({ body, status: answer.status }).toEqual({ body, status });
      expect(messageOf(answer)).toMatch(message);
    }
    const wrongType = await admin(service.url, 'POST', '', definition(), {
      'Content-Type': 'text/plain',
    });
    expect(wrongType.status).toBe(415);
    const rows = await dataSource.query<Array<{ n: number }>>(
      'SELECT count(*)::int AS n FROM schedule',
    );
    expect(rows[0].n).toBe(0);
  });

  it('refuses email with a 400 that says why when the service sends no e-mail', async () => {
    const answer = await admin(
      service.url,
      'POST',
      '',
      definition({ email: { to: ['team@example.com'] } }),
    );
    expect(answer.status).toBe(400);
    expect(messageOf(answer)).toBe(
      'email: this service sends no e-mail (SMTP_URL and EMAIL_FROM not configured); ' +
        'leave email out or ask the operator to configure it.',
    );
    const rows = await dataSource.query<Array<{ n: number }>>(
      'SELECT count(*)::int AS n FROM schedule',
    );
    expect(rows[0].n).toBe(0);
  });

  it('needs an admin: no credentials is a 401', async () => {
    const answer = await request(`${service.url}${REST}/admin/schedules`, { headers: APP });
    expect(answer.status).toBe(401);
  });

  it('creates (201, Location), reads, lists, replaces and deletes (204) a schedule', async () => {
    const schedule = await created(service.url, definition());
    expect(schedule).toMatchObject({
      application: 'planner',
      name: 'report',
      cron: '0 30 6 * * 1-5',
      timeZone: 'Europe/Berlin',
      job: { rScript: 'tick.R', meta: { region: 'north' } },
      catchUp: 'skip',
      callbackUrl: null,
      email: null,
      paused: false,
      lastRun: null,
    });
    // 06:30 in Berlin on a weekday: 05:30 or 04:30 UTC.
    expect(schedule.nextRunTime).toMatch(/T0[45]:30:00\.000Z$/);
    expect(await scheduleOf(service.url, schedule.id)).toEqual(schedule);

    const replaced = await admin(service.url, 'PUT', `/${schedule.id}`, {
      ...definition({ name: 'evening report', cron: '0 0 18 * * *', timeZone: 'UTC' }),
      job: { functionCall: 'json', payload: '{}' },
    });
    // The application has no R_FUNCTIONS: the replacement is refused and nothing changes.
    expect(replaced.status).toBe(400);
    const renamed = await admin(
      service.url,
      'PUT',
      `/${schedule.id}`,
      definition({ name: 'evening report', cron: '0 0 18 * * *', timeZone: 'UTC' }),
    );
    expect(renamed.status).toBe(200);
    expect(JSON.parse(renamed.text)).toMatchObject({
      id: schedule.id,
      name: 'evening report',
      nextRunTime: expect.stringMatching(/T18:00:00\.000Z$/) as unknown,
    });
    const list = JSON.parse((await admin(service.url, 'GET', '')).text) as {
      schedules: ScheduleView[];
    };
    expect(list.schedules.map((s) => [s.id, s.name])).toEqual([[schedule.id, 'evening report']]);

    // Another application's admin view does not see it.
    const elsewhere = await admin(service.url, 'GET', `/${schedule.id}`, undefined, {
      'X-SVC-Application-Name': 'other',
    });
    expect(elsewhere.status).toBe(404);

    expect((await admin(service.url, 'DELETE', `/${schedule.id}`)).status).toBe(204);
    expect((await admin(service.url, 'GET', `/${schedule.id}`)).status).toBe(404);
    expect((await admin(service.url, 'DELETE', `/${schedule.id}`)).status).toBe(404);
    expect((await admin(service.url, 'GET', '/not-a-uuid')).status).toBe(400);
    expect((await admin(service.url, 'PATCH', `/${schedule.id}`)).status).toBe(405);
  });

  it('runs the script every 2 s with its meta; the list shows next and last run and the last job; the callback is delivered', async () => {
    const schedule = await created(service.url, {
      name: 'ticker',
      cron: '*/2 * * * * *',
      timeZone: 'UTC',
      job: { rScript: 'tick.R', meta: { region: 'north' } },
      callbackUrl: receiver.url('/scheduled'),
    });
    const ran = await waitFor(
      async () => {
        const now = await scheduleOf(service.url, schedule.id);
        return now.lastRun?.jobId ? now : undefined;
      },
      30000,
      'the first run',
    );
    await admin(service.url, 'POST', `/${schedule.id}/pause`);
    const lastRun = ran.lastRun!;
    expect(new Date(lastRun.plannedTime).getUTCSeconds() % 2).toBe(0);
    expect(lastRun.jobUri).toBe(`${service.url}${REST}/jobs/planner/${lastRun.jobId}`);
    expect(new Date(ran.nextRunTime!).getTime()).toBeGreaterThan(
      new Date(lastRun.plannedTime).getTime(),
    );

    // The job ran on R, with the meta and the planned time in configuration.txt.
    const result = await waitForResult(`${service.url}${REST}/results/planner/${lastRun.jobId}`, {
      Accept: 'application/json',
    });
    expect(JSON.parse(result.text)).toMatchObject({ success: true, type: 'zip' });
    const [job] = await dataSource.query<Array<{ source: string; meta: Record<string, string> }>>(
      'SELECT source, meta FROM job WHERE id = $1',
      [lastRun.jobId],
    );
    expect(job).toEqual({
      source: 'schedule',
      meta: {
        region: 'north',
        rScript: 'tick.R',
        scheduleId: schedule.id,
        schedulePlannedTime: lastRun.plannedTime,
      },
    });

    // Its callback reaches the receiver, signed with the application's secret.
    const delivery = await waitFor(
      () => Promise.resolve(receiver.deliveriesFor(lastRun.jobId!)[0]),
      60000,
      'the callback of the scheduled job',
    );
    expect(delivery.headers['x-svc-signature']).toBe(
      `sha256=${createHmac('sha256', SECRET).update(delivery.body).digest('hex')}`,
    );
    expect(JSON.parse(delivery.body.toString())).toMatchObject({
      result: { jobId: lastRun.jobId, success: true },
    });
  });

  it('pause: no runs while paused, no next run; resume: runs again from then on, none for the paused times', async () => {
    const schedule = await created(service.url, {
      name: 'pausable',
      cron: '* * * * * *',
      job: { rScript: 'tick.R' },
      catchUp: 'runOnce',
    });
    await waitFor(async () => (await scheduleOf(service.url, schedule.id)).lastRun, 30000, 'a run');
    const paused = JSON.parse(
      (await admin(service.url, 'POST', `/${schedule.id}/pause`)).text,
    ) as ScheduleView;
    expect(paused).toMatchObject({ paused: true, nextRunTime: null });
    const runsOf = async (): Promise<Date[]> =>
      (
        await dataSource.query<Array<{ planned_at: Date }>>(
          'SELECT planned_at FROM schedule_run WHERE schedule_id = $1 ORDER BY planned_at',
          [schedule.id],
        )
      ).map((row) => row.planned_at);
    const beforePause = await runsOf();
    // Long enough for three planned times to pass (and to be missed: runOnce would catch up).
    await sleep(3000);
    expect(await runsOf()).toEqual(beforePause);
    const resumedAt = Date.now();
    const resumed = await admin(service.url, 'POST', `/${schedule.id}/resume`);
    expect(JSON.parse(resumed.text)).toMatchObject({ paused: false });
    const after = await waitFor(
      async () => {
        const runs = await runsOf();
        return runs.length > beforePause.length ? runs : undefined;
      },
      30000,
      'a run after resuming',
    );
    await admin(service.url, 'POST', `/${schedule.id}/pause`);
    // Nothing for the seconds it was paused: the next run is planned after the resume.
    const firstAfter = after[beforePause.length];
    expect(firstAfter.getTime()).toBeGreaterThan(resumedAt - 1000);
    expect((await admin(service.url, 'POST', `/${schedule.id}/stop`)).status).toBe(404);
    expect((await admin(service.url, 'GET', `/${schedule.id}/pause`)).status).toBe(405);
  });

  it('runs a function call with its payload on the schedule', async () => {
    const put = await request(`${service.url}${REST}/admin/catalog/R_FUNCTIONS/echo.R`, {
      method: 'PUT',
      headers: { ...APP, Authorization: ADMIN_AUTHORIZATION },
      body: "svcJsonService <- function(payload) paste0('{\"got\":', payload, '}')\n",
    });
    expect(put.status).toBe(201);
    const schedule = await created(service.url, {
      name: 'call',
      cron: '* * * * * *',
      job: { functionCall: 'json', payload: '{"n":7}' },
    });
    expect(schedule.job).toEqual({ functionCall: 'json', payload: '{"n":7}' });
    const ran = await waitFor(
      async () => (await scheduleOf(service.url, schedule.id)).lastRun?.jobId,
      30000,
      'the first call',
    );
    await admin(service.url, 'POST', `/${schedule.id}/pause`);
    await waitForResult(`${service.url}${REST}/results/planner/${ran}`);
    const data = await request(`${service.url}${REST}/result/planner/${ran}.json`);
    expect([data.status, JSON.parse(data.text)]).toEqual([200, { got: { n: 7 } }]);
  });
});

describe('schedules: who may manage them', () => {
  let service: TestService;

  beforeAll(async () => {
    // alice administers planner; bob may submit jobs to planner and administers other.
    service = await startTestService(
      await basicUsersEnvironment({
        planner: {
          adminPrincipals: ['alice'],
          userPrincipals: ['bob'],
          scriptSubmissionAllowed: true,
        },
        other: { adminPrincipals: ['bob'] },
      }),
    );
    const put = await request(`${service.url}${REST}/admin/catalog/R_SCRIPTS/tick.R`, {
      method: 'PUT',
      headers: { ...APP, ...ALICE },
      body: TICK_SCRIPT,
    });
    expect(put.status).toBe(201);
  });
  afterAll(async () => {
    await service.stop();
  });

  it("an application's admin manages its schedules; its users and other applications' admins cannot", async () => {
    const asAlice = { Authorization: ALICE.Authorization };
    const made = await admin(
      service.url,
      'POST',
      '',
      { name: 'nightly', cron: '@daily', job: { rScript: 'tick.R' } },
      asAlice,
    );
    expect(made.status).toBe(201);
    const { id } = JSON.parse(made.text) as ScheduleView;
    const asBob = { Authorization: BOB.Authorization };
    const attempts: Array<[string, string, unknown]> = [
      ['GET', '', undefined],
      ['POST', '', { name: 'mine', cron: '* * * * * *', job: { rScript: 'tick.R' } }],
      ['GET', `/${id}`, undefined],
      ['DELETE', `/${id}`, undefined],
      ['POST', `/${id}/pause`, undefined],
    ];
    for (const [method, path, body] of attempts) {
      const answer = await admin(service.url, method, path, body, asBob);
      expect({ method, path, status: answer.status }).toEqual({ method, path, status: 403 });
    }
    // bob's own application does not reach planner's schedule.
    const viaOther = await admin(service.url, 'DELETE', `/${id}`, undefined, {
      ...asBob,
      'X-SVC-Application-Name': 'other',
    });
    expect(viaOther.status).toBe(404);
    const anonymous = await admin(service.url, 'GET', '', undefined, { Authorization: '' });
    expect(anonymous.status).toBe(401);
    expect((await admin(service.url, 'GET', `/${id}`, undefined, asAlice)).status).toBe(200);
  });
});

/** A connection to the test database while no node has it open (the embedded one included). */
async function withDatabase(
  database: TestDatabase,
  work: (client: Client) => Promise<void>,
): Promise<void> {
  const embedded = database.url ? null : await EmbeddedPostgres.start(database.dataDir);
  const client = new Client({ connectionString: database.url ?? embedded!.url });
  await client.connect();
  try {
    await work(client);
  } finally {
    await client.end();
    await embedded?.stop();
  }
}

describe('schedules: catch-up after the nodes were down', () => {
  let database: TestDatabase;
  let service: RunningService | null = null;

  const start = async (): Promise<string> => {
    const config = loadConfig(testEnvironment(database, ADMIN_ENV));
    service = await startService(config, new PinoLoggerService(config.logLevel));
    return service.url ?? '';
  };

  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    await service?.close();
    await database.drop();
  });

  it('runOnce runs one job for the missed times (the latest); skip runs none and waits for the next', async () => {
    let base = await start();
    await putCatalogScript(base, 'tick.R', TICK_SCRIPT);
    // Hourly, half an hour away from now: no planned time falls into the test.
    const minute = (new Date().getUTCMinutes() + 30) % 60;
    const cron = `0 ${minute} * * * *`;
    const runOnce = await created(base, { name: 'once', cron, job: { rScript: 'tick.R' } });
    expect(runOnce.catchUp).toBe('runOnce');
    const skip = await created(base, {
      name: 'skip',
      cron,
      job: { rScript: 'tick.R' },
      catchUp: 'skip',
    });
    await service!.close();
    service = null;

    // While every node is down: the schedules' clocks five hours back, as after an outage.
    await withDatabase(database, async (client) => {
      await client.query(`UPDATE schedule SET covered_until = now() - interval '5 hours'`);
    });
    base = await start();

    const caughtUp = await waitFor(
      async () => (await scheduleOf(base, runOnce.id)).lastRun,
      30000,
      'the catch-up run',
    );
    // The latest missed planned time: within the last hour, at the schedule's minute.
    const planned = new Date(caughtUp.plannedTime);
    expect(planned.getUTCMinutes()).toBe(minute);
    expect(Date.now() - planned.getTime()).toBeLessThan(3_600_000);
    expect(Date.now() - planned.getTime()).toBeGreaterThan(60_000);
    const result = await waitForResult(`${base}${REST}/results/planner/${caughtUp.jobId}`, {
      Accept: 'application/json',
    });
    expect(JSON.parse(result.text)).toMatchObject({ success: true });

    const dataSource = service!.app.get(DataSource);
    const runs = async (id: string): Promise<number> =>
      (
        await dataSource.query<Array<{ n: number }>>(
          'SELECT count(*)::int AS n FROM schedule_run WHERE schedule_id = $1',
          [id],
        )
      )[0].n;
    // skip: its clock moved to the same latest missed time, with no run and no job.
    await waitFor(
      async () => {
        const [row] = await dataSource.query<Array<{ covered_until: Date }>>(
          'SELECT covered_until FROM schedule WHERE id = $1',
          [skip.id],
        );
        return row.covered_until.getTime() === planned.getTime();
      },
      30000,
      'the skip schedule to settle its missed times',
    );
    expect(await runs(skip.id)).toBe(0);
    expect(await runs(runOnce.id)).toBe(1);
    const jobs = await dataSource.query<Array<{ schedule: string; n: number }>>(
      `SELECT meta->>'scheduleId' AS schedule, count(*)::int AS n FROM job
        WHERE source = 'schedule' GROUP BY 1`,
    );
    expect(jobs).toEqual([{ schedule: runOnce.id, n: 1 }]);
    const skipView = await scheduleOf(base, skip.id);
    expect(skipView.lastRun).toBeNull();
    expect(new Date(skipView.nextRunTime!).getTime()).toBeGreaterThan(Date.now());
  });
});

const REPORTS_FROM = 'reports@svc.example.com';

/** The job a result e-mail is about (its text names it). */
function jobOfMail(mail: ReceivedMail): string | undefined {
  return /Job ([0-9a-f-]{36}) of application planner/.exec(mail.mail.text ?? '')?.[1];
}

describe("schedules: a run's result by e-mail", () => {
  let smtp: SmtpRecorder;
  let database: TestDatabase;
  let service: RunningService | null = null;
  let base = '';

  const start = async (): Promise<void> => {
    const config = loadConfig(
      testEnvironment(database, {
        ...ADMIN_ENV,
        SMTP_URL: `smtp://127.0.0.1:${smtp.port}`,
        EMAIL_FROM: REPORTS_FROM,
        CALLBACK_FIRST_RETRY_MS: '300',
        CALLBACK_MAX_RETRY_DELAY_SECONDS: '1',
      }),
    );
    service = await startService(config, new PinoLoggerService(config.logLevel));
    base = service.url ?? '';
  };
  const query = <T>(sql: string, params: unknown[] = []): Promise<T[]> =>
    service!.app.get(DataSource).query<T[]>(sql, params);
  const mailsWith = (subject: string): ReceivedMail[] =>
    smtp.received.filter((r) => r.mail.subject === subject);

  beforeAll(async () => {
    smtp = await startSmtpRecorder();
    database = await createTestDatabase();
    await start();
    await putCatalogScript(base, 'tick.R', TICK_SCRIPT);
  });
  afterAll(async () => {
    await service?.close();
    await database.drop();
    await smtp.stop();
  });

  const definition = (email: unknown): Record<string, unknown> => ({
    name: 'mailed report',
    cron: '0 0 5 * * *',
    job: { rScript: 'tick.R' },
    email,
  });

  it('validates email: addresses, their number, its fields; a 400 names the field', async () => {
    const eleven = Array.from({ length: 11 }, (_, i) => `member${i}@example.com`);
    const cases: Array<[unknown, RegExp]> = [
      [
        { to: ['team@example.com', 'not an address'] },
        /^email\.to\[1\] "not an address" is not an e-mail address/,
      ],
      [{ to: ['a@example.com, b@example.com'] }, /^email\.to\[0\] .* is not an e-mail address/],
      [{ to: ['Team <team@example.com>'] }, /^email\.to\[0\] .* is not an e-mail address/],
      [
        { to: ['team@example.com\r\nBcc: x@evil.example'] },
        /^email\.to\[0\] .* is not an e-mail address/,
      ],
      [
        { to: ['team@example.com'], cc: ['@example.com'] },
        /^email\.cc\[0\] "@example\.com" is not/,
      ],
      [{ to: [] }, /^email\.to must be a non-empty list/],
      [{ cc: ['team@example.com'] }, /^email\.to is required/],
      [{ to: eleven }, /^email\.to and email\.cc have 11 addresses; at most 10 are allowed/],
      [{ to: ['team@example.com'], bcc: ['x@example.com'] }, /^email has unknown fields: bcc/],
      [
        { to: ['team@example.com'], subject: 'Report\r\nBcc: x@evil.example' },
        /^email\.subject must have at most 200 characters and no control characters/,
      ],
      ['team@example.com', /^email must be an object/],
    ];
    for (const [email, message] of cases) {
      const answer = await admin(base, 'POST', '', definition(email));
      expect({ email, status: answer.status }).toEqual({ email, status: 400 });
      expect(messageOf(answer)).toMatch(message);
    }
    expect((await query<{ n: number }>('SELECT count(*)::int AS n FROM schedule'))[0].n).toBe(0);
  });

  it('stores email: shown by GET, changed and removed by PUT; the subject has a default', async () => {
    const schedule = await created(base, definition({ to: ['team@example.com'] }));
    expect(schedule.email).toEqual({
      to: ['team@example.com'],
      cc: [],
      subject: 'Result of schedule mailed report',
    });
    const email = { to: ['lead@example.com'], cc: ['audit@example.com'], subject: 'Daily' };
    const changed = await admin(base, 'PUT', `/${schedule.id}`, definition(email));
    expect(changed.status).toBe(200);
    expect((await scheduleOf(base, schedule.id)).email).toEqual(email);
    const removed = await admin(base, 'PUT', `/${schedule.id}`, definition(null));
    expect(removed.status).toBe(200);
    expect((await scheduleOf(base, schedule.id)).email).toBeNull();
    expect((await admin(base, 'DELETE', `/${schedule.id}`)).status).toBe(204);
  });

  it("sends each run's result once: the result files attached, the configured subject and recipients", async () => {
    const subject = 'Planner report every 2 s';
    const schedule = await created(base, {
      name: 'mailed ticker',
      cron: '*/2 * * * * *',
      job: { rScript: 'tick.R', meta: { region: 'south' } },
      email: { to: ['team@example.com', 'lead@example.com'], cc: ['audit@example.com'], subject },
    });
    const first = await waitFor(
      () => Promise.resolve(mailsWith(subject)[0]),
      90000,
      'the e-mail of the first run',
    );
    await admin(base, 'POST', `/${schedule.id}/pause`);
    expect(first.mail.from?.value[0].address).toBe(REPORTS_FROM);
    expect(first.mail.to).toMatchObject({
      value: [{ address: 'team@example.com' }, { address: 'lead@example.com' }],
    });
    expect(first.mail.cc).toMatchObject({ value: [{ address: 'audit@example.com' }] });
    expect([...first.envelopeTo].sort()).toEqual([
      'audit@example.com',
      'lead@example.com',
      'team@example.com',
    ]);
    const jobId = jobOfMail(first);
    const seen = first.mail.attachments.find((a) => a.filename === 'seen.txt');
    expect(seen?.content.toString('utf8')).toContain(`scheduleId = ${schedule.id}`);
    expect(seen?.content.toString('utf8')).toContain('region = south');
    const [job] = await query<{ meta: Record<string, string> }>(
      'SELECT meta FROM job WHERE id = $1',
      [jobId],
    );
    expect(job.meta.scheduleId).toBe(schedule.id);

    // Every run (paused now) owes one e-mail, and each is sent once.
    const runs = await query<{ job_id: string }>(
      'SELECT job_id FROM schedule_run WHERE schedule_id = $1 AND job_id IS NOT NULL',
      [schedule.id],
    );
    const runJobs = runs.map((run) => run.job_id).sort();
    expect(runJobs.length).toBeGreaterThanOrEqual(1);
    await waitFor(
      async () => {
        const sent = await query<{ n: number }>(
          `SELECT count(*)::int AS n FROM mail_reply
            WHERE source = 'job' AND state = 'sent' AND job_id = ANY($1::uuid[])`,
          [runJobs],
        );
        return sent[0].n === runJobs.length;
      },
      120000,
      "every run's e-mail to be sent",
    );
    await sleep(1000); // a second message for a job would come now
    expect(mailsWith(subject).map(jobOfMail).sort()).toEqual(runJobs);
  });

  it("a run's e-mail owed by a node that stops before sending it is sent by the next node", async () => {
    const subject = 'Handed over';
    smtp.refusing = true;
    const schedule = await created(base, {
      name: 'handed over',
      cron: '* * * * * *',
      job: { rScript: 'tick.R' },
      email: { to: ['team@example.com'], subject },
    });
    const ran = await waitFor(
      async () => (await scheduleOf(base, schedule.id)).lastRun?.jobId,
      30000,
      'the first run',
    );
    await admin(base, 'POST', `/${schedule.id}/pause`);
    // Its result is stored and the server refused the e-mail: still owed when the node stops.
    await waitForResult(`${base}${REST}/results/planner/${ran}`, { Accept: 'application/json' });
    await waitFor(
      async () =>
        (
          await query<{ attempts: number }>(
            `SELECT attempts FROM mail_reply WHERE source = 'job' AND job_id = $1 AND state = 'pending'`,
            [ran],
          )
        )[0]?.attempts > 0,
      60000,
      'a refused attempt',
    );
    await service!.close();
    service = null;
    expect(mailsWith(subject)).toEqual([]);

    smtp.refusing = false;
    await start();
    const runs = await query<{ job_id: string }>(
      'SELECT job_id FROM schedule_run WHERE schedule_id = $1 AND job_id IS NOT NULL',
      [schedule.id],
    );
    const runJobs = runs.map((run) => run.job_id).sort();
    await waitFor(
      () => Promise.resolve(mailsWith(subject).length >= runJobs.length),
      120000,
      'the e-mails the stopped node owed',
    );
    await sleep(1000);
    expect(mailsWith(subject).map(jobOfMail).sort()).toEqual(runJobs);
  });
});

const describeWithServer = SERVER_DATABASE_URL ? describe : describe.skip;

// Several nodes need a shared database server; the embedded database belongs to one process.
describeWithServer('schedules: two nodes fire each planned time once', () => {
  let database: TestDatabase;
  let nodes: ServiceProcess[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    // API nodes only: the jobs stay queued, and the job table shows what was fired.
    nodes = await spawnNodes(testEnvironment(database, { ...ADMIN_ENV, ROLE: 'api' }), 2);
  });
  afterAll(async () => {
    for (const node of nodes) {
      node.child.kill('SIGTERM');
    }
    await Promise.all(nodes.map((node) => node.exited()));
    await database.drop();
  });

  // A whole minute of a per-second schedule; one node is killed half-way (a crash), and the
  // other goes on without a gap.
  it('a schedule every second gives exactly one job per planned second over a minute', async () => {
    const [first, second] = nodes;
    await putCatalogScript(first.url, 'tick.R', TICK_SCRIPT);
    const schedule = await created(second.url, {
      name: 'every second',
      cron: '* * * * * *',
      job: { rScript: 'tick.R' },
    });
    const start = Date.now();
    const client = new Client({ connectionString: database.url! });
    await client.connect();
    try {
      const runs = async (): Promise<Array<{ planned_at: Date; job_id: string; node: string }>> =>
        (
          await client.query<{ planned_at: Date; job_id: string; node: string }>(
            'SELECT planned_at, job_id, node FROM schedule_run WHERE schedule_id = $1 ORDER BY planned_at',
            [schedule.id],
          )
        ).rows;
      await sleep(30_000 - (Date.now() - start));
      first.child.kill('SIGKILL');
      await first.exited();
      const all = await waitFor(
        async () => {
          const now = await runs();
          return now.length > 0 &&
            now[now.length - 1].planned_at.getTime() - now[0].planned_at.getTime() >= 60_000
            ? now
            : undefined;
        },
        90_000,
        'a minute of runs',
      );
      const times = all.map((run) => run.planned_at.getTime());
      // Every second from the first to the last, none twice (the key), none left out.
      const gaps = times.slice(1).filter((time, i) => time - times[i] !== 1000);
      expect(gaps).toEqual([]);
      expect(times.length).toBeGreaterThanOrEqual(61);
      // The first planned second after the schedule was made has its run: no gap at the start.
      expect(times[0]).toBe(Math.floor(Date.parse(schedule.createdTime) / 1000) * 1000 + 1000);

      // One job per run, no job without a run: the job table agrees.
      const jobs = (
        await client.query<{ id: string; planned: string }>(
          `SELECT id, meta->>'schedulePlannedTime' AS planned FROM job
            WHERE source = 'schedule' AND meta->>'scheduleId' = $1`,
          [schedule.id],
        )
      ).rows;
      const inWindow = jobs.filter((job) => Date.parse(job.planned) <= times[times.length - 1]);
      expect(inWindow.map((job) => job.id).sort()).toEqual(all.map((run) => run.job_id).sort());
      expect(new Set(inWindow.map((job) => job.planned)).size).toBe(inWindow.length);
      expect(inWindow.map((job) => Date.parse(job.planned)).sort()).toEqual(times);
      const byNode = new Map<string, number>();
      all.forEach((run) => byNode.set(run.node, (byNode.get(run.node) ?? 0) + 1));
      // Both nodes fired (which one wins a second is a race); the second alone after the kill.
      process.stdout.write(`runs per node: ${JSON.stringify([...byNode])}\n`);
    } finally {
      await client.end();
    }
  }, 150_000);
});

interface AuditEvent {
  principal: string | null;
  authMethod: string | null;
  clientAddress: string | null;
  requestId: string | null;
  action: string;
  application: string | null;
  jobId: string | null;
  details: string | null;
}

describe('schedules: who a run acts as, and the audit of every change (AUDIT_PSEUDONYMIZE)', () => {
  const PSEUDONYM_KEY = 'a-test-key-of-at-least-thirty-two-characters';
  const pseudonym = (name: string): string =>
    `h:${createHmac('sha256', PSEUDONYM_KEY).update(name, 'utf8').digest('hex')}`;
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService({
      ...(await basicUsersEnvironment({
        planner: { adminPrincipals: ['alice'], userPrincipals: ['bob'] },
      })),
      AUDIT_PSEUDONYMIZE: 'true',
      AUDIT_PSEUDONYM_KEY: PSEUDONYM_KEY,
    });
    const put = await request(`${service.url}${REST}/admin/catalog/R_SCRIPTS/tick.R`, {
      method: 'PUT',
      headers: { ...APP, ...ALICE },
      body: TICK_SCRIPT,
    });
    expect(put.status).toBe(201);
  });
  afterAll(async () => {
    await service.stop();
  });

  const asAlice = { Authorization: ALICE.Authorization };
  const asRoot = { Authorization: ROOT.Authorization };

  async function auditText(): Promise<string> {
    const answer = await request(`${service.url}${REST}/admin/audit?limit=1000`, {
      headers: { ...ROOT, Accept: 'application/json' },
    });
    expect(answer.status).toBe(200);
    return answer.text;
  }
  const eventsIn = (text: string): AuditEvent[] =>
    (JSON.parse(text) as { auditEvents: AuditEvent[] }).auditEvents;
  const viewOf = async (id: string): Promise<ScheduleView> =>
    JSON.parse((await admin(service.url, 'GET', `/${id}`, undefined, asRoot)).text) as ScheduleView;
  const detailsOf = (event: AuditEvent): Record<string, unknown> =>
    JSON.parse(event.details ?? '{}') as Record<string, unknown>;

  it("runs as the schedule, never as the request that made it; every change is audited with before and after, naming no one in clear; the creator's lost right stops them, not the schedule", async () => {
    const made = await admin(
      service.url,
      'POST',
      '',
      { name: 'hostile', cron: '* * * * * *', job: { rScript: 'tick.R' } },
      { ...asAlice, 'X-Request-Id': 'made-by-the-creator-1' },
    );
    expect(made.status).toBe(201);
    const schedule = JSON.parse(made.text) as ScheduleView & {
      createdBy: string | null;
      updatedBy: string | null;
    };
    expect(schedule).toMatchObject({ createdBy: 'user:alice', updatedBy: 'user:alice' });
    const ran = await waitFor(
      async () => {
        const now = await viewOf(schedule.id);
        return now.lastRun?.jobId ? now : undefined;
      },
      20000,
      'the first run',
    );

    // The run's job acts as the schedule: not alice, not her request, not her address.
    let text = await auditText();
    const submitted = eventsIn(text).filter(
      (e) => e.action === 'job.submitted' && e.application === 'planner',
    );
    expect(submitted.length).toBeGreaterThan(0);
    for (const event of submitted) {
      expect(event).toMatchObject({
        principal: `schedule:${schedule.id}`,
        authMethod: 'schedule',
        clientAddress: null,
        requestId: null,
      });
    }
    expect(submitted.map((e) => e.jobId)).toContain(ran.lastRun?.jobId);
    const created = eventsIn(text).filter((e) => e.action === 'schedule.created');
    expect(created).toEqual([
      expect.objectContaining({
        principal: pseudonym('user:alice'),
        authMethod: 'user',
        requestId: 'made-by-the-creator-1',
        application: 'planner',
      }),
    ]);
    expect(detailsOf(created[0])).toEqual({
      scheduleId: schedule.id,
      before: null,
      after: {
        name: 'hostile',
        cron: '* * * * * *',
        timeZone: 'UTC',
        job: { rScript: 'tick.R', meta: {} },
        catchUp: 'runOnce',
        callbackUrl: null,
        email: null,
        paused: false,
        createdBy: pseudonym('user:alice'),
        updatedBy: pseudonym('user:alice'),
      },
    });

    // alice loses her right to administer planner: the settings' user lists are pseudonymised.
    const etag = (
      await request(`${service.url}${REST}/admin/applications/planner`, { headers: ROOT })
    ).headers.get('etag');
    const revoked = await request(`${service.url}${REST}/admin/applications/planner`, {
      method: 'PUT',
      headers: { ...ROOT, 'Content-Type': 'application/json', 'If-Match': etag ?? '' },
      body: JSON.stringify({ security: { adminPrincipals: [], userPrincipals: ['bob'] } }),
    });
    expect(revoked.status).toBe(200);
    // She can no longer touch the schedule she made...
    for (const [method, path] of [
      ['POST', `/${schedule.id}/pause`],
      ['DELETE', `/${schedule.id}`],
      ['GET', `/${schedule.id}`],
    ]) {
      const answer = await admin(service.url, method, path, undefined, asAlice);
      expect({ method, path, status: answer.status }).toEqual({ method, path, status: 403 });
    }
    // ...but the schedule is the application's: it keeps running, as itself.
    const before = (await viewOf(schedule.id)).lastRun?.plannedTime ?? '';
    await waitFor(
      async () =>
        ((await viewOf(schedule.id)).lastRun?.plannedTime ?? '') > before ? true : undefined,
      20000,
      'a run after alice lost her right',
    );

    // root pauses, resumes, changes and deletes it: one row each, with before and after.
    expect(
      (await admin(service.url, 'POST', `/${schedule.id}/pause`, undefined, asRoot)).status,
    ).toBe(200);
    const resumed = await admin(service.url, 'POST', `/${schedule.id}/resume`, undefined, asRoot);
    expect(JSON.parse(resumed.text)).toMatchObject({
      createdBy: 'user:alice',
      updatedBy: 'user:root',
    });
    const replaced = await admin(
      service.url,
      'PUT',
      `/${schedule.id}`,
      { name: 'hostile', cron: '0 0 5 * * *', job: { rScript: 'tick.R' } },
      asRoot,
    );
    expect(replaced.status).toBe(200);
    expect((await admin(service.url, 'DELETE', `/${schedule.id}`, undefined, asRoot)).status).toBe(
      204,
    );

    text = await auditText();
    expect(text).not.toContain('alice');
    const changes = eventsIn(text)
      .filter((e) => e.action.startsWith('schedule.'))
      .reverse();
    expect(changes.map((e) => [e.action, e.principal])).toEqual([
      ['schedule.created', pseudonym('user:alice')],
      ['schedule.paused', pseudonym('user:root')],
      ['schedule.resumed', pseudonym('user:root')],
      ['schedule.changed', pseudonym('user:root')],
      ['schedule.deleted', pseudonym('user:root')],
    ]);
    const [, paused, , changed, deleted] = changes.map(detailsOf);
    expect(paused).toMatchObject({
      before: { paused: false, updatedBy: pseudonym('user:alice') },
      after: {
        paused: true,
        updatedBy: pseudonym('user:root'),
        createdBy: pseudonym('user:alice'),
      },
    });
    expect(changed).toMatchObject({
      before: { cron: '* * * * * *' },
      after: { cron: '0 0 5 * * *' },
    });
    expect(deleted).toMatchObject({ before: { name: 'hostile' }, after: null });
    const settings = eventsIn(text).find((e) => e.action === 'application.changed');
    expect(detailsOf(settings!)).toMatchObject({
      before: {
        security: { adminPrincipals: [pseudonym('alice')], userPrincipals: [pseudonym('bob')] },
      },
      after: { security: { adminPrincipals: [], userPrincipals: [pseudonym('bob')] } },
    });
    // A schedule's own name is no person's: its rows can be found by it.
    const byRun = await request(
      `${service.url}${REST}/admin/audit?principal=${encodeURIComponent(`schedule:${schedule.id}`)}`,
      { headers: { ...ROOT, Accept: 'application/json' } },
    );
    expect(eventsIn(byRun.text).length).toBeGreaterThan(0);
  });
});
