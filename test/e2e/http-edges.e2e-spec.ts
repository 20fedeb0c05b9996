import { request, REST } from '../support/rest-client';
import { startTestService, TestService } from '../support/test-service';

const APP_ORIGIN = 'http://app.example.test:3000';

describe('the root and cross-origin requests, by default', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(async () => {
    await service.stop();
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
    service = await startTestService({
      CORS_ORIGINS: `${APP_ORIGIN}, https://other.example.test`,
    });
  });
  afterAll(async () => {
    await service.stop();
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
