/**
 * A job's log: stored lines and the live stream.
 *
 * @ci-pass embedded
 * @ci-pass node24
 */
import { makeZip } from '../support/zip-fixtures';
import { parseXml, postZip, REST, request, waitForResult } from '../support/rest-client';
import { TestService, waitFor } from '../support/test-service';
import { sharedServices } from '../support/shared-services';
import { follow, SseReader } from '../support/sse-client';
import { JobLogService } from '../../src/jobs/job-log.service';
import { EventStreamQuota } from '../../src/security/event-stream-quota';
import { addressBucket } from '../../src/security/auth-failure-limiter';

// The second line is printed only after a minute: seeing the first while the job still runs
// shows it arrived as printed, not after the run.
const SCRIPT = 'cat("first line\\n"); message("to stderr")\nSys.sleep(60)\ncat("second line\\n")\n';

// One service per R_SCRIPT_MODE (on webR, where the mode means nothing, one for the file); the
// tests of a mode open at most two streams at once, within EVENT_STREAMS_PER_CALLER.
const services = sharedServices();
const settings = (mode: string) => ({
  R_SCRIPT_MODE: mode,
  JOB_LOG_MAX_BYTES: '4096',
  EVENT_STREAMS_PER_CALLER: '2',
});

describe.each(['fork', 'spawn'])('GET /jobs/{app}/{jobId}/log (R_SCRIPT_MODE=%s)', (mode) => {
  let service: TestService;

  beforeAll(async () => {
    service = await services.start(settings(mode));
  });

  it('streams lines as R prints them, resumes with Last-Event-ID, ends with the outcome', async () => {
    const submitted = await postZip(
      service.url,
      await makeZip([{ name: 'job.R', content: SCRIPT }]),
    );
    const token = parseXml(submitted.text).jobToken;
    const logUri = `${service.url}${REST}/jobs/demo/${token.jobId}/log`;
    const live = await follow(logUri);
    const first = await live.next();
    expect(first).toMatchObject({ id: expect.stringMatching(/^\d+$/), event: 'line' });
    expect(JSON.parse(first!.data)).toMatchObject({ stream: 'stdout', line: 'first line' });
    const second = await live.next();
    expect(JSON.parse(second!.data)).toMatchObject({ line: 'to stderr' });
    // R is still sleeping before its second line.
    const status = await request(`${service.url}${REST}/jobs/demo/${token.jobId}`);
    expect(parseXml(status.text).jobStatus.state).toBe('RUNNING');
    const plain = await request(logUri);
    expect(plain.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(plain.text).toMatch(/^\S+Z stdout first line\n\S+Z \w+ to stderr\n$/);
    // End it; the stream ends with the outcome.
    expect(
      (await request(`${service.url}${REST}/jobs/demo/${token.jobId}`, { method: 'DELETE' }))
        .status,
    ).toBe(202);
    const end = await live.next();
    expect(end).toMatchObject({ event: 'end' });
    expect(JSON.parse(end!.data)).toEqual({ success: false, type: 'txt', cancelled: true });
    expect(await live.next()).toBeNull();
    // Resumed after the first line: the second line, then the end.
    const resumed = await follow(logUri, { 'Last-Event-ID': first!.id! });
    expect(JSON.parse((await resumed.next())!.data)).toMatchObject({ line: 'to stderr' });
    expect((await resumed.next())?.event).toBe('end');
    await waitForResult(token.resultUri, {}, 10000);
  });

  it('lets go of a live stream whose client went away', async () => {
    const submitted = await postZip(
      service.url,
      await makeZip([{ name: 'job.R', content: 'cat("one line\\n")\nSys.sleep(60)\n' }]),
    );
    const token = parseXml(submitted.text).jobToken;
    const logs = service.app.get(JobLogService);
    const client = new AbortController();
    const response = await fetch(`${service.url}${REST}/jobs/demo/${token.jobId}/log`, {
      headers: { Accept: 'text/event-stream' },
      signal: client.signal,
    });
    const live = new SseReader(response.body!.getReader());
    expect((await live.next())?.event).toBe('line');
    expect(logs.openStreams).toBe(1);
    client.abort();
    await waitFor(async () => Promise.resolve(logs.openStreams === 0), 10000, 'the stream let go');
    expect(
      (await request(`${service.url}${REST}/jobs/demo/${token.jobId}`, { method: 'DELETE' }))
        .status,
    ).toBe(202);
    await waitForResult(token.resultUri, {}, 10000);
  });

  it('cuts the log at JOB_LOG_MAX_BYTES with a note; 400 for a bad Last-Event-ID; 404 unknown job', async () => {
    const submitted = await postZip(
      service.url,
      await makeZip([
        { name: 'job.R', content: 'for (i in 1:500) cat(sprintf("line %03d of many\\n", i))\n' },
      ]),
    );
    const token = parseXml(submitted.text).jobToken;
    await waitForResult(token.resultUri, {}, 60000);
    const logUri = `${service.url}${REST}/jobs/demo/${token.jobId}/log`;
    const plain = await waitFor(
      async () => {
        const answer = await request(logUri);
        return answer.text.includes('[output cut') ? answer : null;
      },
      10000,
      'the cut note',
    );
    const lines = plain.text.trimEnd().split('\n');
    expect(lines[0]).toMatch(/ stdout line 001 of many$/);
    expect(lines[lines.length - 1]).toMatch(
      / svc \[output cut: .* 4096 bytes \(JOB_LOG_MAX_BYTES\)\]$/,
    );
    expect(lines.length).toBeLessThan(500);
    const bad = await request(logUri, {
      headers: { Accept: 'text/event-stream', 'Last-Event-ID': 'x' },
    });
    expect(bad.status).toBe(400);
    const unknown = await request(
      `${service.url}${REST}/jobs/demo/00000000-0000-4000-8000-000000000000/log`,
    );
    expect(unknown.status).toBe(404);
    // The log goes with the result.
    expect((await request(token.resultUri, { method: 'DELETE' })).status).toBe(204);
    expect((await request(logUri)).status).toBe(404);
  });
});

describe('live logs of an anonymous caller (AUTH_MODE=none, EVENT_STREAMS_PER_CALLER=2)', () => {
  let service: TestService;

  beforeAll(async () => {
    // fork is the default on Linux: the service of the first describe.
    service = await services.start(settings('fork'));
    // The streams of the tests before are let go: this address holds none of its two.
    const quota = service.app.get(EventStreamQuota);
    await waitFor(
      async () => Promise.resolve(quota.heldBy(`address:${addressBucket('127.0.0.1')}`) === 0),
      10000,
      'the streams of the tests before let go',
    );
  });

  it('holds an address to its streams, opened at once and under forged forwarding headers', async () => {
    const submitted = await postZip(
      service.url,
      await makeZip([{ name: 'job.R', content: 'cat("one line\\n")\nSys.sleep(60)\n' }]),
    );
    const token = parseXml(submitted.text).jobToken;
    const logUri = `${service.url}${REST}/jobs/demo/${token.jobId}/log`;
    const streams = new AbortController();
    try {
      // TRUST_PROXY is unset: a forwarded address is the client's claim, not another caller.
      const answers = await Promise.all(
        ['198.51.100.1', '198.51.100.2', '2001:db8::1', '203.0.113.9', undefined].map((forwarded) =>
          fetch(logUri, {
            headers: {
              Accept: 'text/event-stream',
              ...(forwarded ? { 'X-Forwarded-For': forwarded } : {}),
            },
            signal: streams.signal,
          }),
        ),
      );
      const statuses = answers.map((answer) => answer.status).sort();
      expect(statuses).toEqual([200, 200, 429, 429, 429]);
      for (const refused of answers.filter((answer) => answer.status === 429)) {
        expect(await refused.text()).toMatch(/EVENT_STREAMS_PER_CALLER=2/);
      }
    } finally {
      streams.abort();
    }
    expect(
      (await request(`${service.url}${REST}/jobs/demo/${token.jobId}`, { method: 'DELETE' }))
        .status,
    ).toBe(202);
    await waitForResult(token.resultUri, {}, 10000);
  });
});
