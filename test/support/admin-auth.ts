import { hashSecret } from '../../src/common/secret-hash';
import { Answer, request, REST } from './rest-client';

/**
 * The global admin that admin-API tests configure. The security guard requires an admin on
 * the admin API; tests start their services with these and send them on every admin request.
 */
export const TEST_ADMIN_USER = 'admin';
export const TEST_ADMIN_PASSWORD = 'test-admin-secret-4711';

export const ADMIN_ENV: Record<string, string> = {
  ADMIN_USER: TEST_ADMIN_USER,
  ADMIN_PASSWORD: TEST_ADMIN_PASSWORD,
};

export const ADMIN_AUTHORIZATION = `Basic ${Buffer.from(
  `${TEST_ADMIN_USER}:${TEST_ADMIN_PASSWORD}`,
).toString('base64')}`;

/** An Authorization header for HTTP Basic. */
export const basicAuthorization = (name: string, password: string): Record<string, string> => ({
  Authorization: `Basic ${Buffer.from(`${name}:${password}`).toString('base64')}`,
});

/** The global admin `root` and the users `alice` and `bob` of `basicUsersEnvironment`. */
export const ROOT = basicAuthorization('root', 'root-secret-1');
export const ALICE = basicAuthorization('alice', 'alice-secret-1');
export const BOB = basicAuthorization('bob', 'bob-secret-1');

/**
 * AUTH_MODE=basic with the global admin root and two users without roles, alice and bob (their
 * hashes made cheaply: tests need no strong key derivation), and the given APPLICATION_SECURITY.
 */
export async function basicUsersEnvironment(
  applicationSecurity: Record<string, unknown>,
): Promise<Record<string, string>> {
  const cheap = { N: 1024, r: 8, p: 1 };
  return {
    AUTH_MODE: 'basic',
    ADMIN_USER: 'root',
    ADMIN_PASSWORD: 'root-secret-1',
    USERS: JSON.stringify({
      alice: { passwordHash: await hashSecret('alice-secret-1', cheap), roles: [] },
      bob: { passwordHash: await hashSecret('bob-secret-1', cheap), roles: [] },
    }),
    APPLICATION_SECURITY: JSON.stringify(applicationSecurity),
  };
}

/** `POST /admin/jobs/{app}/{jobId}/retry` as the test admin of ADMIN_ENV; the answer. */
export function retryAsAdmin(base: string, application: string, jobId: string): Promise<Answer> {
  return request(`${base}${REST}/admin/jobs/${application}/${jobId}/retry`, {
    method: 'POST',
    headers: { Authorization: ADMIN_AUTHORIZATION, Accept: 'application/json' },
  });
}

/**
 * Someone else's change of an application's rights and settings (as root of
 * basicUsersEnvironment), made over the version in force now: what a console's open settings
 * then meet as a 412. Answers the PUT's status.
 */
export async function changeSettingsMeanwhile(
  base: string,
  application: string,
  entry: Record<string, unknown>,
): Promise<number> {
  const url = `${base}${REST}/admin/applications/${application}`;
  const current = await request(url, { headers: ROOT });
  const changed = await request(url, {
    method: 'PUT',
    headers: {
      ...ROOT,
      'Content-Type': 'application/json',
      'If-Match': current.headers.get('etag') ?? '',
    },
    body: JSON.stringify(entry),
  });
  return changed.status;
}
