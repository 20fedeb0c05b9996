import { AuditService } from '../audit/audit.service';
import type { AuditEventEntity } from '../audit/audit-event.entity';
import { HttpAnswer } from '../common/http-answer';
import { NodeConfig } from '../config/config-slices';
import { apiErrorOf, BASE, controllerOf, fakeRequest } from '../../test/support/controller-testing';
import { AuditController } from './audit.controller';

function event(id: number, principal: string): AuditEventEntity {
  return {
    id,
    time: new Date('2026-11-02T10:00:00Z'),
    principal,
    authMethod: 'basic',
    clientAddress: '10.0.0.1',
    requestId: `r${id}`,
    action: 'job.submitted',
    applicationName: 'app',
    jobId: null,
    outcome: 'success',
    details: { size: 1 },
  } as unknown as AuditEventEntity;
}

describe('AuditController', () => {
  let list: jest.Mock;
  let controller: AuditController;

  beforeEach(async () => {
    list = jest.fn().mockResolvedValue([]);
    controller = await controllerOf(AuditController, [
      { provide: AuditService, useValue: { list } },
      { provide: NodeConfig, useValue: { publicBaseUrl: BASE } },
    ]);
  });

  const get = (query: Record<string, unknown>, headers: Record<string, string> = {}) =>
    controller.list(fakeRequest({ path: '/svc/api/rest/admin/audit', headers, query }), query);

  it('asks the service for the filter the query names, one row more than the page', async () => {
    await get({
      from: '2026-11-01T00:00:00Z',
      principal: 'alice',
      application: 'app_1',
      action: 'job.cancelled',
      limit: '5',
      offset: '10',
    });
    expect(list).toHaveBeenCalledWith({
      from: new Date('2026-11-01T00:00:00Z'),
      to: null,
      principal: 'alice',
      applicationName: 'app_1',
      action: 'job.cancelled',
      limit: 5,
      offset: 10,
    });
  });

  it('answers XML by default, with no next page when the service has no more', async () => {
    list.mockResolvedValue([event(1, 'alice')]);
    const answer = await get({});
    expect(answer).toBeInstanceOf(HttpAnswer);
    expect(answer.headers).toEqual({
      Vary: 'Accept',
      'Content-Type': 'application/vnd.svc+xml; charset=utf-8',
    });
    expect(answer.body).toContain('<auditEvents xmlns="urn:svc:rest:types" more="false">');
    expect(answer.body).toContain('<principal>alice</principal><authMethod>basic</authMethod>');
  });

  it('writes a name that looks like markup or an entity as text a reader gets back whole', async () => {
    list.mockResolvedValue([event(1, 'a &amp; b <c>\u0001')]);
    const answer = await get({});
    expect(answer.body).toContain('<principal>a &amp;amp; b &lt;c&gt;\uFFFD</principal>');
  });

  it('links the next page and leaves out the extra row when there are more', async () => {
    list.mockResolvedValue([event(1, 'a'), event(2, 'b'), event(3, 'c')]);
    const answer = await get({ limit: '2', principal: 'x', format: 'json' });
    expect(answer.headers.Link).toBe(
      '</svc/api/rest/admin/audit?limit=2&principal=x&format=json&offset=2>; rel="next"',
    );
    const body = JSON.parse(answer.body as string) as { auditEvents: unknown[]; more: boolean };
    expect(body.more).toBe(true);
    expect(body.auditEvents).toHaveLength(2);
  });

  it('sends CSV as a download, a formula-like cell quoted', async () => {
    list.mockResolvedValue([event(7, '=cmd')]);
    const answer = await get({}, { Accept: 'text/csv' });
    expect(answer.headers['Content-Disposition']).toBe('attachment; filename="audit.csv"');
    expect(answer.headers['Content-Type']).toBe('text/csv; charset=utf-8');
    expect(answer.body).toBe(
      'id,time,principal,authMethod,clientAddress,requestId,action,application,jobId,jobUri,outcome,details\r\n' +
        `7,2026-11-02T10:00:00.000Z,'=cmd,basic,10.0.0.1,r7,job.submitted,app,,,success,"{""size"":1}"\r\n`,
    );
  });

  it("links a row about a job to the job's page in the console (JSON and CSV, not XML)", async () => {
    const jobId = '5b1e0c52-7d3e-4b8a-9c21-0e5f4d3b2a10';
    list.mockResolvedValue([{ ...event(8, 'alice'), jobId }]);
    const json = JSON.parse((await get({ format: 'json' })).body as string) as {
      auditEvents: Array<{ jobUri: string | null }>;
    };
    expect(json.auditEvents[0].jobUri).toBe(`${BASE}/svc/console/#/jobs/app/${jobId}`);
    const csv = (await get({ format: 'csv' })).body as string;
    expect(csv).toContain(`,app,${jobId},${BASE}/svc/console/#/jobs/app/${jobId},success,`);
    expect((await get({})).body).not.toContain('jobUri');
  });

  it.each([
    [{ action: 'job.eaten' }, 'action must be one of job.submitted,'],
    [{ limit: '0' }, 'limit must be a whole number from 1 to 1000.'],
    [{ offset: '-1' }, 'offset must be a whole number from 0 to 1000000.'],
    [{ from: '2026-11-01' }, 'from must be a time in ISO 8601 with a zone'],
    [{ principal: ['a', 'b'] }, 'principal must be given once, at most 256 characters.'],
    [{ application: 'no such' }, 'The application parameter'],
    [{ format: 'pdf' }, 'format must be xml, json or csv (got "pdf").'],
  ])('answers 400 for %j without asking the service', async (query, message) => {
    const error = await apiErrorOf(() => get(query));
    expect(error.status).toBe(400);
    expect(error.message).toContain(message);
    expect(list).not.toHaveBeenCalled();
  });
});
