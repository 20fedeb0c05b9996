import { ALICE, basicUsersEnvironment, BOB } from '../support/admin-auth';
import { fileField, postForm, textField } from '../support/form-client';
import { parseMetrics } from '../support/prometheus';
import { Answer, parseXml, postZip, request } from '../support/rest-client';
import { faultAnswer, jobEnvelope, postSoap } from '../support/soap-client';
import { startTestService, TestService } from '../support/test-service';
import { makeZip } from '../support/zip-fixtures';

/**
 * The per-application limits of APPLICATION_SETTINGS at the intake, over HTTP: REST, the form
 * and SOAP. ROLE=api runs no jobs, so what is queued stays queued.
 */
const SETTINGS = {
  queued: { maxQueuedJobs: 2 },
  rated: { maxSubmissionsPerMinute: 2 },
  caller: { maxSubmissionsPerMinutePerPrincipal: 1 },
  small: { maxJobSizeBytes: 300 },
  ranked: { defaultPriority: 1, minPriority: -5, maxPriority: 5 },
};

describe('application limits', () => {
  let service: TestService;
  let zip: Buffer;

  beforeAll(async () => {
    service = await startTestService({
      ROLE: 'api',
      APPLICATION_SETTINGS: JSON.stringify(SETTINGS),
    });
    zip = await makeZip([{ name: 'main.R', content: 'writeLines("hi", "out.txt")\n' }]);
  });

  afterAll(async () => {
    await service.stop();
  });

  function rest(app: string, headers: Record<string, string> = {}, body = zip): Promise<Answer> {
    return postZip(service.url, body, { 'X-SVC-Application-Name': app, ...headers });
  }

  function form(app: string, extra: Array<[string, string]> = []): Promise<Answer> {
    return postForm(service.url, [
      textField('X-SVC-Application-Name', app),
      ...extra.map(([name, value]) => textField(name, value)),
      fileField('job.zip', zip, 'application/zip'),
    ]);
  }

  function soap(app: string): Promise<Answer> {
    return postSoap(
      service.url,
      jobEnvelope(app, [{ name: 'job.zip', contentType: 'application/zip', data: zip }]),
    );
  }

  /** A 429 with a Retry-After of whole seconds, its error message naming `limit`. */
  function expectRefused(answer: Answer, limit: string): void {
    expect(answer.status).toBe(429);
    expect(Number(answer.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const error = parseXml(answer.text).error;
    expect(error.status).toBe('429');
    expect(error.message).toContain(limit);
  }

  async function expectFault(answer: Answer, limit: string): Promise<void> {
    expect(answer.status).toBe(500);
    expect(Number(answer.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const fault = await faultAnswer(answer);
    expect(fault.errors).toEqual([]);
    expect(fault.faultcode).toBe('soap:Client');
    expect(fault.faultstring).toContain(limit);
  }

  it('answers 429 naming maxQueuedJobs once an application has that many queued: REST, form, SOAP', async () => {
    expect((await rest('queued')).status).toBe(202);
    expect((await form('queued')).status).toBe(202);
    expectRefused(await rest('queued'), 'maxQueuedJobs');
    expectRefused(await form('queued'), 'maxQueuedJobs');
    await expectFault(await soap('queued'), 'maxQueuedJobs');
    // A large body is read and dropped: the client gets the answer, not a broken connection.
    expectRefused(await rest('queued', {}, Buffer.alloc(3 * 1024 * 1024, 1)), 'maxQueuedJobs');
    // Other applications are not held by it.
    expect((await rest('other')).status).toBe(202);
    // /metrics: queued jobs per application (a name not configured counts as "other"), and
    // the refusals by limit.
    const metrics = parseMetrics((await request(`${service.url}/metrics`)).text);
    const jobs = metrics.get('svc_application_jobs')?.metrics ?? [];
    expect(jobs).toContainEqual({ labels: { application: 'queued', state: 'QUEUED' }, value: '2' });
    expect(jobs).toContainEqual({ labels: { application: 'other', state: 'QUEUED' }, value: '1' });
    expect(metrics.get('svc_submissions_rejected_total')?.metrics).toContainEqual({
      labels: { application: 'queued', reason: 'maxQueuedJobs' },
      value: '4',
    });
  });

  it('answers 429 naming maxSubmissionsPerMinute beyond the application’s rate', async () => {
    expect((await rest('rated')).status).toBe(202);
    expect((await rest('rated')).status).toBe(202);
    const refused = await rest('rated');
    expectRefused(refused, 'maxSubmissionsPerMinute');
    // One token comes back every 30 s at 2 a minute.
    expect(Number(refused.headers.get('retry-after'))).toBeLessThanOrEqual(30);
    expectRefused(await form('rated'), 'maxSubmissionsPerMinute');
    await expectFault(await soap('rated'), 'maxSubmissionsPerMinute');
  });

  it('answers 429 naming maxSubmissionsPerMinutePerPrincipal beyond a caller’s rate', async () => {
    expect((await form('caller')).status).toBe(202);
    expectRefused(await rest('caller'), 'maxSubmissionsPerMinutePerPrincipal');
    await expectFault(await soap('caller'), 'maxSubmissionsPerMinutePerPrincipal');
  });

  it('answers 413 naming maxJobSizeBytes for a job larger than the application allows', async () => {
    const large = await makeZip([
      { name: 'main.R', content: 'writeLines("hi", "out.txt")\n' },
      { name: 'data.bin', content: Buffer.alloc(2000, 7), compress: false },
    ]);
    const answer = await rest('small', {}, large);
    expect(answer.status).toBe(413);
    expect(parseXml(answer.text).error.message).toContain('maxJobSizeBytes');
    const formAnswer = await postForm(service.url, [
      textField('X-SVC-Application-Name', 'small'),
      fileField('job.zip', large, 'application/zip'),
    ]);
    expect(formAnswer.status).toBe(413);
    expect(parseXml(formAnswer.text).error.message).toContain('maxJobSizeBytes');
    const fault = await postSoap(
      service.url,
      jobEnvelope('small', [{ name: 'job.zip', contentType: 'application/zip', data: large }]),
    );
    expect((await faultAnswer(fault)).faultstring).toContain('maxJobSizeBytes');
    // The small job of the same application is taken.
    expect((await rest('small')).status).toBe(202);
  });

  it('takes a priority within the application’s bounds and answers 400 beyond them', async () => {
    expect((await rest('ranked', { 'X-SVC-Priority': '5' })).status).toBe(202);
    expect((await rest('ranked', { 'X-SVC-Priority': '-5' })).status).toBe(202);
    expect((await rest('ranked')).status).toBe(202);
    for (const [value, message] of [
      ['6', 'maxPriority: 5'],
      ['-6', 'minPriority: -5'],
      ['high', 'whole number'],
    ]) {
      const answer = await rest('ranked', { 'X-SVC-Priority': value });
      expect(answer.status).toBe(400);
      expect(parseXml(answer.text).error.message).toContain(message);
    }
    expect((await form('ranked', [['X-SVC-Priority', '2']])).status).toBe(202);
    const refused = await form('ranked', [['X-SVC-Priority', '9']]);
    expect(refused.status).toBe(400);
    expect(parseXml(refused.text).error.message).toContain('maxPriority');
    // SOAP: the priority element, beyond the bounds a soap:Client fault naming them.
    const withPriority = (priority: string): string =>
      jobEnvelope('ranked', [
        { name: 'job.zip', contentType: 'application/zip', data: zip },
      ]).replace(
        '</t:applicationName>',
        `</t:applicationName><t:priority>${priority}</t:priority>`,
      );
    const soapFault = await faultAnswer(await postSoap(service.url, withPriority('9')));
    expect(soapFault.faultcode).toBe('soap:Client');
    expect(soapFault.faultstring).toContain('maxPriority: 5');
    expect(
      (await faultAnswer(await postSoap(service.url, withPriority('x')))).faultstring,
    ).toContain('whole number');
    // An application without bounds takes only its default, 0.
    expect((await rest('other', { 'X-SVC-Priority': '1' })).status).toBe(400);
    expect((await rest('other', { 'X-SVC-Priority': '0' })).status).toBe(202);
  });
});

describe('application limits per caller', () => {
  let service: TestService;
  let zip: Buffer;

  beforeAll(async () => {
    service = await startTestService({
      ...(await basicUsersEnvironment({
        shared: { userPrincipals: ['alice', 'bob'], scriptSubmissionAllowed: true },
      })),
      ROLE: 'api',
      APPLICATION_SETTINGS: JSON.stringify({
        shared: { maxSubmissionsPerMinutePerPrincipal: 2, maxSubmissionsPerMinute: 3 },
      }),
    });
    zip = await makeZip([{ name: 'main.R', content: 'writeLines("hi", "out.txt")\n' }]);
  });

  afterAll(async () => {
    await service.stop();
  });

  const submitAs = (who: Record<string, string>): Promise<Answer> =>
    postZip(service.url, zip, { 'X-SVC-Application-Name': 'shared', ...who });

  it('holds each caller to its own rate, and all of them to the application’s', async () => {
    expect((await submitAs(ALICE)).status).toBe(202);
    expect((await submitAs(ALICE)).status).toBe(202);
    const refused = await submitAs(ALICE);
    expect(refused.status).toBe(429);
    expect(parseXml(refused.text).error.message).toContain(
      'The caller "user:alice" submitted more than 2 jobs a minute',
    );
    // alice's refusals took nothing from the application's bucket: bob gets its third token.
    expect((await submitAs(BOB)).status).toBe(202);
    const full = await submitAs(BOB);
    expect(full.status).toBe(429);
    expect(parseXml(full.text).error.message).toContain('maxSubmissionsPerMinute: 3');
  });
});
