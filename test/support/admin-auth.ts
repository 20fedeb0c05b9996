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
