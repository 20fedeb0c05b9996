/**
 * HTTP edges: methods, sizes, encodings and connections.
 *
 * @ci-pass node24
 */
import { request, REST } from '../support/rest-client';
import { TestService } from '../support/test-service';
import { sharedServices } from '../support/shared-services';

const APP_ORIGIN = 'http://app.example.test:3000';
const METRICS_TOKEN = 'metrics-token-for-the-tests-0123456789';
/** HOST, TRUST_PROXY and METRICS_ACCESS as they are by default; a token to scrape with. */
const EDGE_DEFAULTS = {
  HOST: '127.0.0.1',
  TRUST_PROXY: 'false',
  METRICS_ACCESS: 'token',
  METRICS_TOKEN,
};
const services = sharedServices();

describe('the root and cross-origin requests, by default', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await services.start(EDGE_DEFAULTS);
  });

  it('GET / redirects a browser to the upload page', async () => {
    const answer = await request(`${service.url}/`, { redirect: 'manual' });
    expect(answer.status).toBe(302);
    expect(answer.headers.get('location')).toBe('svc/');
    const followed = await fetch(`${service.url}/`);
    expect(followed.url).toBe(`${service.url}/svc/`);
    expect(followed.headers.get('content-type')).toMatch(/^text\/html/);
  });

  it('grants no cross-origin access unless CORS_ORIGINS names the origin', async () => {
    const answer = await request(`${service.url}${REST}/results/demo`, {
      headers: { Origin: APP_ORIGIN },
    });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('access-control-allow-origin')).toBeNull();
    const preflight = await request(`${service.url}${REST}/jobs`, {
      method: 'OPTIONS',
      headers: { Origin: APP_ORIGIN, 'Access-Control-Request-Method': 'POST' },
    });
    expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
  });
});

describe('cross-origin requests with CORS_ORIGINS', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await services.start({
      CORS_ORIGINS: `${APP_ORIGIN}, https://other.example.test`,
    });
  });

  it('answers a listed origin, with the headers a browser client reads', async () => {
    const answer = await request(`${service.url}${REST}/results/demo`, {
      headers: { Origin: APP_ORIGIN, Accept: 'application/vnd.svc+json' },
    });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('access-control-allow-origin')).toBe(APP_ORIGIN);
    expect(answer.headers.get('access-control-expose-headers')).toContain('Location');
    expect(answer.headers.get('vary')).toMatch(/Origin/);
  });

  it('answers a preflight for a job submission with its headers', async () => {
    const preflight = await request(`${service.url}${REST}/jobs`, {
      method: 'OPTIONS',
      headers: {
        Origin: APP_ORIGIN,
        'Access-Control-Request-Method': 'POST',
        'Access-Control-Request-Headers': 'content-type, x-svc-application-name, authorization',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe(APP_ORIGIN);
    expect(preflight.headers.get('access-control-allow-methods')).toContain('POST');
    expect(preflight.headers.get('access-control-allow-headers')).toContain(
      'x-svc-application-name',
    );
  });

  it('gives an origin that is not listed nothing', async () => {
    const answer = await request(`${service.url}${REST}/results/demo`, {
      headers: { Origin: 'https://evil.example.test' },
    });
    expect(answer.headers.get('access-control-allow-origin')).toBeNull();
  });
});

describe('the HTTP edge treats what comes in as hostile (issue 31)', () => {
  let service: TestService;

  beforeAll(async () => {
    // The service of the describe of defaults above.
    service = await services.start(EDGE_DEFAULTS);
  });

  it('listens on HOST only: another address of this machine is refused', async () => {
    const port = new URL(service.url ?? '').port;
    expect((await request(`http://127.0.0.1:${port}/svc/`)).status).toBe(200);
    // 127.0.0.2 is this machine too (the loopback is a /8), but not the address bound.
    await expect(fetch(`http://127.0.0.2:${port}/svc/`)).rejects.toMatchObject({
      cause: { code: 'ECONNREFUSED' },
    });
  });

  it('sends X-Content-Type-Options: nosniff with every answer, errors and 404s included', async () => {
    const answers = [
      await request(`${service.url}/svc/`),
      await request(`${service.url}/no/such/path`),
      await request(`${service.url}${REST}/results/not a name`),
      await request(`${service.url}${REST}/jobs`, { method: 'POST', body: 'x' }),
      await request(`${service.url}/metrics`),
      await request(`${service.url}${REST}/system/health/live`),
    ];
    expect(answers.map((answer) => answer.status)).toEqual([200, 404, 400, 400, 401, 200]);
    for (const answer of answers) {
      expect(answer.headers.get('x-content-type-options')).toBe('nosniff');
    }
  });

  it('builds links from Host, not from forwarded headers a client sends', async () => {
    const answer = await request(`${service.url}${REST}/openapi.json`, {
      headers: {
        'X-Forwarded-Proto': 'https',
        'X-Forwarded-Host': 'evil.example',
        Forwarded: 'host=evil.example;proto=https',
      },
    });
    const document = JSON.parse(answer.text) as { servers: Array<{ url: string }> };
    expect(document.servers[0].url).toBe(`${service.url}${REST}`);
  });

  it('shows /metrics to a holder of METRICS_TOKEN only', async () => {
    const anonymous = await request(`${service.url}/metrics`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBe('Bearer realm="metrics"');
    expect(anonymous.text).toMatch(/METRICS_TOKEN/);
    expect(anonymous.text).not.toMatch(/svc_/);
    for (const authorization of [`Bearer ${METRICS_TOKEN}x`, `Basic ${METRICS_TOKEN}`, 'Bearer ']) {
      const refused = await request(`${service.url}/metrics`, { headers: { authorization } });
      expect([authorization, refused.status]).toEqual([authorization, 401]);
    }
    const scraped = await request(`${service.url}/metrics`, {
      headers: { authorization: `Bearer ${METRICS_TOKEN}` },
    });
    expect(scraped.status).toBe(200);
    expect(scraped.text).toMatch(/^svc_queue_depth/m);
  });
});
