import { loadConfig } from '../config/app-config';
import { MASK, maskedConfiguration, maskUrlCredentials } from './masked-configuration';

describe('maskedConfiguration', () => {
  it('masks secrets by name, whatever their shape, and keeps everything else', () => {
    const masked = maskedConfiguration({
      port: 8888,
      adminUser: 'root',
      adminPassword: 'hunter2',
      authUsers: { alice: { passwordHash: 'x', roles: ['admin'] } },
      apiKeys: { 'k-123': 'alice' },
      sessionSecret: 's',
      jwtToken: 't',
      apiKey: 'abc',
      unsetPassword: null,
      emptyKeys: {},
      nested: { clientSecret: 'n', keep: 'yes' },
      databaseUrl: 'postgres://svc:pw@db:5432/svc',
    });
    expect(masked).toEqual({
      port: 8888,
      adminUser: 'root',
      adminPassword: MASK,
      authUsers: MASK,
      apiKeys: MASK,
      sessionSecret: MASK,
      jwtToken: MASK,
      apiKey: MASK,
      unsetPassword: null,
      emptyKeys: {},
      nested: { clientSecret: MASK, keep: 'yes' },
      databaseUrl: `postgres://svc:${MASK}@db:5432/svc`,
    });
  });

  it('masks URL credentials with or without a user name', () => {
    expect(maskUrlCredentials('postgres://svc@db/x and https://u:p@h/ and x://:q@h')).toBe(
      `postgres://svc@db/x and https://u:${MASK}@h/ and x://:${MASK}@h`,
    );
    expect(maskUrlCredentials('postgres://db/x')).toBe('postgres://db/x');
  });

  it('shows the whole effective configuration (no key lost)', () => {
    const config = loadConfig({
      DATABASE_URL: 'postgres://a:b@h/d',
      DATABASE_LISTEN_URL: 'postgres://a:c@direct/d',
    });
    const masked = maskedConfiguration(config);
    expect(Object.keys(masked).sort()).toEqual(Object.keys(config).sort());
    expect(JSON.stringify(masked)).not.toContain(':b@');
    expect(masked.databaseListenUrl).toBe(`postgres://a:${MASK}@direct/d`);
  });
});
