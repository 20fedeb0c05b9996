import { ApiError } from '../common/api-error';
import type { NodeConfig, SecurityConfig } from '../config/config-slices';
import { apiErrorOf, fakeRequest } from '../../test/support/controller-testing';
import type { AccessPolicyService } from './access-policy.service';
import type { AuthenticationService } from './authentication.service';
import {
  isSameOrigin,
  RequestAccessService,
  sendsBrowserCredentials,
} from './request-access.service';

const BASE = 'https://svc.example';
const BASIC = 'Basic YWRtaW46c2VjcmV0';
const COOKIE = 'svc_session=session-0123456789abcdefghij';

function service(publicBaseUrl: string | null = BASE): RequestAccessService {
  return new RequestAccessService(
    { authMode: 'basic', oidcClientId: null, adminUser: 'admin' } as unknown as SecurityConfig,
    { publicBaseUrl } as NodeConfig,
    {} as AccessPolicyService,
    {} as AuthenticationService,
  );
}

function refusal(method: string, headers: Record<string, string>): ApiError | null {
  try {
    service().refuseCrossSite(fakeRequest({ method, headers }));
    return null;
  } catch (error) {
    if (error instanceof ApiError) {
      return error;
    }
    throw error;
  }
}

describe('RequestAccessService.refuseCrossSite', () => {
  const foreign: Array<[string, Record<string, string>]> = [
    ['Sec-Fetch-Site: cross-site', { 'Sec-Fetch-Site': 'cross-site' }],
    ['Sec-Fetch-Site: same-site', { 'Sec-Fetch-Site': 'same-site' }],
    ['an Origin of another site, no Sec-Fetch-Site', { Origin: 'https://evil.example' }],
    ['an Origin on another port', { Origin: 'https://svc.example:8443' }],
    ['Origin: null, no Sec-Fetch-Site', { Origin: 'null' }],
    ['Origin: null from another site', { Origin: 'null', 'Sec-Fetch-Site': 'cross-site' }],
    [
      'a same-origin claim with a foreign Origin',
      { 'Sec-Fetch-Site': 'same-origin', Origin: 'https://evil.example' },
    ],
    ['a Referer of another site and nothing else', { Referer: 'https://evil.example/page' }],
    ['a malformed Origin', { Origin: 'not a url' }],
  ];
  const credentials: Array<[string, Record<string, string>]> = [
    ['Basic', { Authorization: BASIC }],
    ['the session cookie', { Cookie: `other=1; ${COOKIE}` }],
    ['a malformed session cookie', { Cookie: 'svc_session=x' }],
    ['Digest', { Authorization: 'Digest username="admin"' }],
    ['Basic beside an API key', { Authorization: BASIC, 'X-SVC-API-Key': 'k.s' }],
    ['Bearer beside the session cookie', { Authorization: 'Bearer k.s', Cookie: COOKIE }],
  ];

  for (const [credential, credentialHeaders] of credentials) {
    for (const [where, whereHeaders] of foreign) {
      it(`refuses a POST with ${credential} and ${where} (403)`, () => {
        const error = refusal('POST', { ...credentialHeaders, ...whereHeaders });
        expect(error?.getStatus()).toBe(403);
        expect(error?.message).toMatch(/must come from the page of this service/);
      });
    }
  }

  it('refuses every method that changes something, tunnelled or not', () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'PROPFIND']) {
      expect(
        refusal(method, { Authorization: BASIC, 'Sec-Fetch-Site': 'cross-site' }),
      ).not.toBeNull();
    }
  });

  it('lets through reading methods from anywhere: links to results from other sites work', () => {
    for (const method of ['GET', 'HEAD', 'OPTIONS']) {
      expect(
        refusal(method, { Authorization: BASIC, Cookie: COOKIE, 'Sec-Fetch-Site': 'cross-site' }),
      ).toBeNull();
    }
  });

  it('lets through credentials set by code from another origin (bearer token, API key)', () => {
    const crossSite = { 'Sec-Fetch-Site': 'cross-site', Origin: 'https://app.example' };
    expect(refusal('POST', { ...crossSite, Authorization: 'Bearer k.s' })).toBeNull();
    expect(refusal('POST', { ...crossSite, 'X-SVC-API-Key': 'k.s' })).toBeNull();
    expect(refusal('POST', { ...crossSite, Cookie: 'other=svc_session' })).toBeNull();
    // Nothing to ride on: the caller's own rights (none in basic mode, then 401).
    expect(refusal('POST', crossSite)).toBeNull();
  });

  it('lets through programmatic clients and the pages of the service', () => {
    const own: Array<Record<string, string>> = [
      {},
      { 'Sec-Fetch-Site': 'same-origin', Origin: BASE },
      { 'Sec-Fetch-Site': 'none' },
      // A page sending no referrer: its browser vouches for the origin.
      { 'Sec-Fetch-Site': 'same-origin', Origin: 'null' },
      { Origin: 'https://SVC.example' },
      { Referer: `${BASE}/svc/` },
    ];
    for (const headers of own) {
      expect(refusal('POST', { Authorization: BASIC, Cookie: COOKIE, ...headers })).toBeNull();
    }
  });
});

describe('isSameOrigin', () => {
  it("compares with the request's Host where no public base URL is set", () => {
    const req = (headers: Record<string, string>) =>
      fakeRequest({ method: 'POST', headers: { Host: '127.0.0.1:3000', ...headers } });
    expect(isSameOrigin(req({ Origin: 'http://127.0.0.1:3000' }), 'http://127.0.0.1:3000')).toBe(
      true,
    );
    expect(isSameOrigin(req({ Origin: 'http://localhost:3000' }), 'http://127.0.0.1:3000')).toBe(
      false,
    );
    expect(isSameOrigin(req({ Origin: 'http://127.0.0.1:3001' }), 'http://127.0.0.1:3000')).toBe(
      false,
    );
    // Behind a proxy: the browser's origin is the public base URL's.
    expect(isSameOrigin(req({ Origin: BASE }), BASE)).toBe(true);
  });

  it('takes a default port as the same host', () => {
    const req = fakeRequest({ method: 'POST', headers: { Host: 'svc.example:443', Origin: BASE } });
    expect(isSameOrigin(req, 'https://elsewhere.example')).toBe(true);
  });
});

describe('sendsBrowserCredentials', () => {
  it('names what a browser attaches by itself, not what only code sets', () => {
    const sends = (headers: Record<string, string>) =>
      sendsBrowserCredentials(fakeRequest({ headers }));
    expect(sends({ Authorization: BASIC })).toBe(true);
    expect(sends({ Authorization: 'basic x' })).toBe(true);
    expect(sends({ Authorization: 'Negotiate x' })).toBe(true);
    expect(sends({ Cookie: COOKIE })).toBe(true);
    expect(sends({ Authorization: 'Bearer k.s' })).toBe(false);
    expect(sends({ Authorization: '  bearer k.s' })).toBe(false);
    expect(sends({ 'X-SVC-API-Key': 'k.s' })).toBe(false);
    expect(sends({ Cookie: 'svc_sessions=1; x=svc_session' })).toBe(false);
    expect(sends({})).toBe(false);
  });
});

it('refuses where no public base URL is set and the request names no Host', async () => {
  const req = fakeRequest({ method: 'POST', headers: { Authorization: BASIC, Origin: BASE } });
  expect(await apiErrorOf(() => service(null).refuseCrossSite(req))).toMatchObject({
    status: 403,
  });
});
