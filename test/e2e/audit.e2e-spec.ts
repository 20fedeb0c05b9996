import { Client } from 'pg';
import { XMLParser } from 'fast-xml-parser';
import { ALICE, basicAuthorization, basicUsersEnvironment, ROOT } from '../support/admin-auth';
import { postZip, REST, waitForResult } from '../support/rest-client';
import {
  SERVER_DATABASE_URL,
  startTestService,
  TestService,
  waitFor,
} from '../support/test-service';
import { makeZip } from '../support/zip-fixtures';

const AUDIT = `${REST}/admin/audit`;
const SECRET = 'audit-callback-secret-42';

interface AuditEvent {
  id: string;
  time: string;
  principal: string | null;
  authMethod: string | null;
  clientAddress: string | null;
  requestId: string | null;
  action: string;
  application: string | null;
  jobId: string | null;
  outcome: string;
  details: string | null;
}

async function auditEnvironment(
  extra: Record<string, string> = {},
): Promise<Record<string, string>> {
  return {
    ...(await basicUsersEnvironment({
      demo: { userPrincipals: ['alice'], scriptSubmissionAllowed: true },
    })),
    AUTH_MAX_FAILURES: '1000',
    SCRIPT_SLOTS: '1',
    ...extra,
  };
}

async function events(
  base: string,
  query = '',
): Promise<{ auditEvents: AuditEvent[]; more: boolean }> {
  const answer = await fetch(`${base}${AUDIT}?${query}`, {
    headers: { ...ROOT, Accept: 'application/json' },
  });
  expect(answer.status).toBe(200);
  return (await answer.json()) as { auditEvents: AuditEvent[]; more: boolean };
}

async function submit(
  base: string,
  script: string,
  headers = ALICE,
): Promise<{ jobId: string; resultUri: string }> {
  const answer = await postZip(base, await makeZip([{ name: 'job.R', content: script }]), {
    ...headers,
    'X-SVC-Application-Name': 'demo',
    Accept: 'application/json',
    'X-Request-Id': 'audit-submit-1',
  });
  expect(answer.status).toBe(202);
  // Plain JSON (Accept: application/json): the token's values without its element name.
  return JSON.parse(answer.text) as { jobId: string; resultUri: string };
}

describe('the audit trail', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService(await auditEnvironment());
  });
  afterAll(async () => {
    await service.stop();
  });

  it('records a job submitted, its result deleted and a running job cancelled, with who, how, from where', async () => {
    const { jobId, resultUri } = await submit(service.url, 'writeLines("ok", "ok.txt")\n');
    await waitForResult(resultUri, ALICE);
    const deleted = await fetch(`${service.url}${REST}/results/demo/${jobId}`, {
      method: 'DELETE',
      headers: ALICE,
    });
    expect(deleted.status).toBe(204);
    const sleeper = await submit(service.url, 'Sys.sleep(60)\n');
    await waitFor(
      async () => {
        const state = await fetch(`${service.url}${REST}/jobs/demo/${sleeper.jobId}`, {
          headers: { ...ALICE, Accept: 'application/json' },
        });
        return ((await state.json()) as { state: string }).state === 'RUNNING';
      },
      60000,
      'the job to run',
    );
    const cancelled = await fetch(`${service.url}${REST}/jobs/demo/${sleeper.jobId}`, {
      method: 'DELETE',
      headers: ROOT,
    });
    expect(cancelled.status).toBe(202);

    const { auditEvents } = await events(service.url, 'application=demo');
    const of = (action: string, job: string) =>
      auditEvents.filter((e) => e.action === action && e.jobId === job);
    expect(of('job.submitted', jobId)).toEqual([
      expect.objectContaining({
        principal: 'user:alice',
        authMethod: 'user',
        clientAddress: expect.stringMatching(/127\.0\.0\.1$/),
        requestId: 'audit-submit-1',
        application: 'demo',
        jobUri: `${service.url}/svc/console/#/jobs/demo/${jobId}`,
        outcome: 'success',
        details: expect.stringContaining('"source":"rest"'),
      }),
    ]);
    expect(of('result.deleted', jobId)).toEqual([
      expect.objectContaining({ principal: 'user:alice' }),
    ]);
    expect(of('job.submitted', sleeper.jobId)).toHaveLength(1);
    expect(of('job.cancelled', sleeper.jobId)).toEqual([
      expect.objectContaining({ principal: 'user:root', authMethod: 'adminUser' }),
    ]);
  });

  it('writes no row for a change that fails', async () => {
    const before = (await events(service.url, 'limit=1000')).auditEvents.length;
    // A submission refused (not a ZIP), a result and a catalog file that do not exist, an unknown
    // key, a settings change with a bad field and one with a stale If-Match, a cancel of a
    // finished job.
    const refused = await postZip(service.url, Buffer.from('not a zip'), {
      ...ALICE,
      'X-SVC-Application-Name': 'demo',
    });
    expect(refused.status).toBe(400);
    const unknownJob = '00000000-0000-4000-8000-000000000000';
    expect(
      (
        await fetch(`${service.url}${REST}/results/demo/${unknownJob}`, {
          method: 'DELETE',
          headers: ALICE,
        })
      ).status,
    ).toBe(404);
    expect(
      (
        await fetch(`${service.url}${REST}/admin/catalog/R_SCRIPTS/missing.R`, {
          method: 'DELETE',
          headers: { ...ROOT, 'X-SVC-Application-Name': 'demo' },
        })
      ).status,
    ).toBe(404);
    expect(
      (
        await fetch(`${service.url}${REST}/admin/api-keys/k0000`, {
          method: 'DELETE',
          headers: ROOT,
        })
      ).status,
    ).toBe(404);
    const put = (body: unknown, ifMatch: string) =>
      fetch(`${service.url}${REST}/admin/applications/demo`, {
        method: 'PUT',
        headers: { ...ROOT, 'Content-Type': 'application/json', 'If-Match': ifMatch },
        body: JSON.stringify(body),
      });
    expect((await put({ settings: { networkAllowed: 'yes' } }, '"0"')).status).toBe(400);
    expect((await put({}, '"7"')).status).toBe(412);
    const after = (await events(service.url, 'limit=1000')).auditEvents;
    expect(after.length).toBe(before);
  });

  it('records keys, settings with before and after but no secret, catalog files, and failed authentications per address', async () => {
    const key = await fetch(`${service.url}${REST}/admin/api-keys`, {
      method: 'POST',
      headers: { ...ROOT, 'Content-Type': 'application/json' },
      body: JSON.stringify({ principal: 'reporter', roles: ['r'] }),
    });
    const { id } = (await key.json()) as { id: string };
    await fetch(`${service.url}${REST}/admin/api-keys/${id}`, { method: 'DELETE', headers: ROOT });
    const changed = await fetch(`${service.url}${REST}/admin/applications/demo`, {
      method: 'PUT',
      headers: { ...ROOT, 'Content-Type': 'application/json', 'If-Match': '"0"' },
      body: JSON.stringify({
        security: { userPrincipals: ['alice', 'bob'], scriptSubmissionAllowed: true },
        settings: { callbackHosts: ['example.org'], callbackSecret: SECRET },
      }),
    });
    expect(changed.status).toBe(200);
    const stored = await fetch(`${service.url}${REST}/admin/catalog/R_SCRIPTS/audited.R`, {
      method: 'PUT',
      headers: { ...ROOT, 'X-SVC-Application-Name': 'demo' },
      body: 'cat(1)\n',
    });
    expect(stored.status).toBe(201);
    for (let i = 0; i < 3; i++) {
      const wrong = await fetch(`${service.url}${REST}/admin/api-keys`, {
        headers: basicAuthorization('root', `wrong-${i}`),
      });
      expect(wrong.status).toBe(401);
    }

    const text = await (
      await fetch(`${service.url}${AUDIT}?limit=1000`, {
        headers: { ...ROOT, Accept: 'application/json' },
      })
    ).text();
    expect(text).not.toContain(SECRET);
    const all = (JSON.parse(text) as { auditEvents: AuditEvent[] }).auditEvents;
    const actions = (action: string) => all.filter((e) => e.action === action);
    expect(actions('apiKey.created')).toEqual([
      expect.objectContaining({
        principal: 'user:root',
        authMethod: 'adminUser',
        outcome: 'success',
      }),
    ]);
    expect(JSON.parse(actions('apiKey.created')[0].details ?? '{}')).toMatchObject({
      keyId: id,
      principal: 'reporter',
    });
    expect(actions('apiKey.revoked')).toEqual([
      expect.objectContaining({ principal: 'user:root' }),
    ]);
    const settings = actions('application.changed');
    expect(settings).toHaveLength(1);
    expect(settings[0].application).toBe('demo');
    expect(JSON.parse(settings[0].details ?? '{}')).toEqual({
      before: {
        security: { userPrincipals: ['alice'], scriptSubmissionAllowed: true },
        settings: { callbackSecretSet: false },
        slots: null,
      },
      after: {
        security: { userPrincipals: ['alice', 'bob'], scriptSubmissionAllowed: true },
        settings: { callbackHosts: ['example.org'], callbackSecretSet: true },
        slots: null,
      },
    });
    expect(actions('catalog.changed')).toEqual([
      expect.objectContaining({ application: 'demo', principal: 'user:root' }),
    ]);
    expect(actions('authentication.failed')).toEqual([
      expect.objectContaining({
        principal: null,
        outcome: 'failure',
        clientAddress: expect.stringMatching(/127\.0\.0\.1$/),
        details: JSON.stringify({ count: 3 }),
      }),
    ]);
  });

  it('filters by action, principal, application and time, and pages', async () => {
    const submitted = await events(service.url, 'action=job.submitted');
    expect(submitted.auditEvents.length).toBeGreaterThanOrEqual(2);
    expect(submitted.auditEvents.every((e) => e.action === 'job.submitted')).toBe(true);
    const byAlice = await events(service.url, 'principal=user:alice&limit=1000');
    expect(byAlice.auditEvents.length).toBeGreaterThan(0);
    expect(byAlice.auditEvents.every((e) => e.principal === 'user:alice')).toBe(true);
    const future = new Date(Date.now() + 3600_000).toISOString();
    expect((await events(service.url, `from=${encodeURIComponent(future)}`)).auditEvents).toEqual(
      [],
    );
    expect((await events(service.url, `to=2001-01-01T00:00:00Z`)).auditEvents).toEqual([]);

    const all = (await events(service.url, 'limit=1000')).auditEvents;
    const first = await fetch(`${service.url}${AUDIT}?limit=2`, {
      headers: { ...ROOT, Accept: 'application/json' },
    });
    const page = (await first.json()) as { auditEvents: AuditEvent[]; more: boolean };
    expect(page).toEqual({ auditEvents: all.slice(0, 2), more: true });
    const next = /<([^>]+)>; rel="next"/.exec(first.headers.get('link') ?? '')?.[1];
    expect(next).toBe(`${AUDIT}?limit=2&offset=2`);
    const second = (await (
      await fetch(`${service.url}${next}`, { headers: { ...ROOT, Accept: 'application/json' } })
    ).json()) as { auditEvents: AuditEvent[] };
    expect(second.auditEvents).toEqual(all.slice(2, 4));
    // Newest first.
    expect([...all].sort((a, b) => b.time.localeCompare(a.time))).toEqual(all);

    for (const [query, field] of [
      ['action=job.exploded', 'action'],
      ['from=yesterday', 'from'],
      ['limit=0', 'limit'],
      ['limit=1001', 'limit'],
      ['offset=-1', 'offset'],
      ['application=a-b', 'application'],
      ['format=pdf', 'format'],
    ]) {
      const bad = await fetch(`${service.url}${AUDIT}?${query}`, {
        headers: { ...ROOT, Accept: 'application/json' },
      });
      expect({ query, status: bad.status }).toEqual({ query, status: 400 });
      expect(await bad.text()).toContain(field);
    }
    expect((await fetch(`${service.url}${AUDIT}`, { headers: ALICE })).status).toBe(403);
    expect((await fetch(`${service.url}${AUDIT}`)).status).toBe(401);
  });

  it('answers CSV and XML as well as JSON', async () => {
    for (let i = 0; i < 2; i++) {
      await fetch(`${service.url}${AUDIT}`, { headers: basicAuthorization('root', 'wrong') });
    }
    const csv = await fetch(`${service.url}${AUDIT}?limit=1000`, {
      headers: { ...ROOT, Accept: 'text/csv' },
    });
    expect(csv.headers.get('content-type')).toMatch(/^text\/csv/);
    const lines = (await csv.text()).trimEnd().split('\r\n');
    const json = (await events(service.url, 'limit=1000')).auditEvents;
    expect(lines[0]).toBe(
      'id,time,principal,authMethod,clientAddress,requestId,action,application,jobId,jobUri,outcome,details',
    );
    expect(lines).toHaveLength(json.length + 1);
    const failed = json.find((e) => e.action === 'authentication.failed');
    expect(lines[1]).toBe(
      `${failed?.id},${failed?.time},,,${failed?.clientAddress},,authentication.failed,,,,failure,"{""count"":2}"`,
    );
    const xml = await fetch(`${service.url}${AUDIT}?limit=1000&format=xml`, { headers: ROOT });
    expect(xml.status).toBe(200);
    expect(xml.headers.get('content-type')).toMatch(/^application\/vnd\.svc\+xml/);
    const parsed = new XMLParser({ parseTagValue: false }).parse(await xml.text()) as {
      auditEvents: { auditEvent: Array<Record<string, string>> };
    };
    expect(parsed.auditEvents.auditEvent).toHaveLength(json.length);
    expect(parsed.auditEvents.auditEvent[0].action).toBe(json[0].action);
    expect(parsed.auditEvents.auditEvent[0].id).toBe(json[0].id);
  });
});

describe('the audit trail with AUDIT_PSEUDONYMIZE', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService(
      await auditEnvironment({
        ROLE: 'api',
        AUDIT_PSEUDONYMIZE: 'true',
        AUDIT_PSEUDONYM_KEY: 'a-test-key-of-at-least-thirty-two-characters',
      }),
    );
  });
  afterAll(async () => {
    await service.stop();
  });

  it('stores a keyed hash instead of the principal, and filters by the name all the same', async () => {
    const { jobId } = await submit(service.url, 'cat(1)\n');
    const text = await (
      await fetch(`${service.url}${AUDIT}?principal=user:alice`, {
        headers: { ...ROOT, Accept: 'application/json' },
      })
    ).text();
    expect(text).not.toContain('alice');
    const found = (JSON.parse(text) as { auditEvents: AuditEvent[] }).auditEvents;
    expect(found).toEqual([
      expect.objectContaining({
        action: 'job.submitted',
        jobId,
        principal: expect.stringMatching(/^h:[0-9a-f]{64}$/),
      }),
    ]);
    expect((await events(service.url, 'principal=user:bob')).auditEvents).toEqual([]);
  });
});

const describeWithServer = SERVER_DATABASE_URL ? describe : describe.skip;

describeWithServer('the audit table', () => {
  let service: TestService;
  let client: Client;

  beforeAll(async () => {
    service = await startTestService(
      await auditEnvironment({
        ROLE: 'all',
        AUDIT_RETENTION_DAYS: '30',
        LEASE_SECONDS: '4',
        HEARTBEAT_SECONDS: '1',
      }),
    );
    client = new Client({ connectionString: service.database.url ?? '' });
    await client.connect();
  });
  afterAll(async () => {
    await client.end();
    await service.stop();
  });

  it('refuses UPDATE, DELETE and TRUNCATE; only the retention deletes, and only rows past it', async () => {
    await client.query(
      `INSERT INTO audit_event (time, action, outcome) VALUES (now() - interval '31 days', 'job.submitted', 'success'),
              (now() - interval '29 days', 'job.cancelled', 'success')`,
    );
    await expect(client.query(`UPDATE audit_event SET principal = 'mallory'`)).rejects.toThrow(
      /append-only/,
    );
    await expect(client.query('DELETE FROM audit_event')).rejects.toThrow(/append-only/);
    await expect(client.query('TRUNCATE audit_event')).rejects.toThrow(/append-only/);
    await waitFor(
      async () => {
        const { rows } = await client.query<{ action: string }>('SELECT action FROM audit_event');
        return rows.length === 1 && rows[0].action === 'job.cancelled';
      },
      20000,
      'the retention to delete the old row',
    );
  });
});
