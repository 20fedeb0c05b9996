import { ConfigError, loadConfig } from '../config/app-config';
import { authMethodsOf } from './security-settings';

/** The problems loadConfig reports for `env` (none: it loaded). */
function problemsOf(env: NodeJS.ProcessEnv): string[] {
  try {
    loadConfig(env);
    return [];
  } catch (error) {
    return error instanceof ConfigError ? error.problems : [String(error)];
  }
}

const HASH = 'scrypt$1024$8$1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g=';

describe('security configuration', () => {
  it('defaults to AUTH_MODE=none with no admin, users, keys or rules', () => {
    expect(loadConfig({})).toMatchObject({
      authMode: 'none',
      adminUser: null,
      adminPassword: null,
      users: {},
      apiKeys: {},
      applicationSecurity: {},
    });
  });

  it('reads every key from the environment', () => {
    const config = loadConfig({
      AUTH_MODE: 'apiKey',
      ADMIN_USER: 'root',
      ADMIN_PASSWORD: 'root pass',
      USERS: JSON.stringify({ alice: { passwordHash: HASH, roles: ['analyst'] } }),
      API_KEYS: JSON.stringify({ k1: { principal: 'reporting', keyHash: HASH } }),
      GLOBAL_ADMINS: '{"roles":["ops"]}',
      APPLICATION_SECURITY: '{"demo":{"userRoles":["analyst"],"scriptSubmissionAllowed":true}}',
      AUTH_MAX_FAILURES: '3',
      AUTH_FAILURE_WINDOW_SECONDS: '60',
    });
    expect(config.authMode).toBe('apiKey');
    expect(config.users.alice.roles).toEqual(['analyst']);
    expect(config.apiKeys.k1.principal).toBe('reporting');
    expect(config.applicationSecurity.demo.scriptSubmissionAllowed).toBe(true);
    expect([config.authMaxFailures, config.authFailureWindowSeconds]).toEqual([3, 60]);
  });

  it('names each bad security setting without echoing secrets', () => {
    const problems = problemsOf({
      AUTH_MODE: 'kerberos',
      ADMIN_USER: 'root',
      USERS: JSON.stringify({ alice: { passwordHash: 'plain-text-secret' } }),
      API_KEYS: JSON.stringify({
        'bad id': { principal: 'x', keyHash: HASH },
        k2: { principal: 'y', keyHash: 'nope' },
      }),
      APPLICATION_SECURITY: '{"demo":{"scriptSubmisionAllowed":true,"userRoles":"analyst"}}',
    });
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^AUTH_MODE=/),
        expect.stringMatching(/^ADMIN_USER and ADMIN_PASSWORD: set both/),
        expect.stringMatching(/^USERS: "alice": passwordHash is not a scrypt/),
        expect.stringMatching(/^API_KEYS: "bad id" is not a valid key id/),
        expect.stringMatching(/^API_KEYS: "k2": keyHash is not/),
        expect.stringMatching(
          /^APPLICATION_SECURITY: "demo": unknown setting scriptSubmisionAllowed/,
        ),
        expect.stringMatching(/^APPLICATION_SECURITY: "demo": userRoles must be a list/),
      ]),
    );
    expect(problems.join('\n')).not.toContain('plain-text-secret');
  });

  it('never echoes a secret value that is not even JSON', () => {
    const problems = problemsOf({ USERS: '{"alice": hunter2}', API_KEYS: '[not json' });
    expect(problems).toHaveLength(2);
    expect(problems.join('\n')).not.toMatch(/hunter2|not json/);
  });

  describe('principals in rules: <kind>:<name>, bare only where one kind of caller can carry it', () => {
    const OIDC = { OIDC_ISSUER: 'https://id.example.com', OIDC_AUDIENCE: 'svc' };
    const rules = (principals: string[]) => ({
      GLOBAL_ADMINS: JSON.stringify({ principals }),
      APPLICATION_SECURITY: JSON.stringify({ demo: { adminPrincipals: principals } }),
    });

    it('keeps bare names where AUTH_MODE lets in one kind of caller, or none', () => {
      for (const AUTH_MODE of ['basic', 'apiKey', 'none']) {
        expect(problemsOf({ AUTH_MODE, ...rules(['alice', 'bob']) })).toEqual([]);
      }
    });

    it('refuses bare names with more than one kind, one line per rule naming the fix', () => {
      for (const AUTH_MODE of ['oidc', 'basic,oidc', 'apiKey,oidc', 'basic,apiKey']) {
        const problems = problemsOf({ AUTH_MODE, ...OIDC, ...rules(['user:carol', 'alice']) });
        expect(problems).toHaveLength(2);
        expect(problems[0]).toMatch(
          new RegExp(
            `^GLOBAL_ADMINS: principals: "alice" is a bare name, which AUTH_MODE=${AUTH_MODE} lets \\d kinds of caller carry: write the kind before each name \\(`,
          ),
        );
        expect(problems[1]).toMatch(/^APPLICATION_SECURITY: "demo": adminPrincipals: "alice"/);
      }
      expect(problemsOf({ AUTH_MODE: 'oidc', ...OIDC, ...rules(['alice']) })[0]).toContain(
        '(oidc:alice, client:alice;',
      );
    });

    it('takes qualified names in every mode, and refuses a kind it does not know', () => {
      const qualified = ['user:alice', 'key:reporting', 'oidc:bob@contoso.example', 'client:ci'];
      expect(problemsOf({ AUTH_MODE: 'basic,apiKey,oidc', ...OIDC, ...rules(qualified) })).toEqual(
        [],
      );
      expect(problemsOf({ AUTH_MODE: 'basic', ...rules(['group:admins', 'user:']) })).toEqual([
        expect.stringMatching(
          /^GLOBAL_ADMINS: principals: "group:admins", "user:" names no kind of caller: write user:<name>, key:<name>, oidc:<name>, client:<name>/,
        ),
        expect.stringMatching(/^APPLICATION_SECURITY: "demo": adminPrincipals: "group:admins"/),
      ]);
    });
  });

  describe('AUTH_MODE as a list, and the OpenID Connect settings', () => {
    const OIDC = {
      OIDC_ISSUER: 'https://keycloak.example.com/realms/company',
      OIDC_AUDIENCE: 'svc-api',
    };

    it('takes none alone, or basic, apiKey and oidc in any combination', () => {
      for (const mode of ['none', 'basic', 'apiKey', 'basic,apiKey', 'apiKey, oidc', 'oidc']) {
        expect(problemsOf({ AUTH_MODE: mode, ...OIDC })).toEqual([]);
      }
      expect(authMethodsOf('apiKey, oidc')).toEqual(new Set(['apiKey', 'oidc']));
      expect(authMethodsOf('none')).toEqual(new Set());
    });

    it.each(['none,basic', 'basic,basic', 'basic,ldap', ','])('refuses AUTH_MODE=%p', (mode) => {
      expect(problemsOf({ AUTH_MODE: mode })).toEqual([
        expect.stringMatching(/^AUTH_MODE=.*: must be none, or a comma-separated list/),
      ]);
    });

    it('oidc needs an issuer (https, or http on localhost) and an audience', () => {
      expect(problemsOf({ AUTH_MODE: 'oidc' })).toEqual([
        expect.stringMatching(/^OIDC_ISSUER: AUTH_MODE includes oidc/),
        expect.stringMatching(/^OIDC_AUDIENCE: AUTH_MODE includes oidc/),
      ]);
      expect(
        problemsOf({ AUTH_MODE: 'oidc', ...OIDC, OIDC_ISSUER: 'http://idp.example.com/realms/x' }),
      ).toEqual([expect.stringMatching(/^OIDC_ISSUER=.*must be an https:\/\/ URL/)]);
      expect(
        problemsOf({ AUTH_MODE: 'oidc', ...OIDC, OIDC_ISSUER: 'http://127.0.0.1:8080/realms/x' }),
      ).toEqual([]);
      // Without oidc in AUTH_MODE the settings are not looked at.
      expect(problemsOf({ AUTH_MODE: 'basic', OIDC_ALGORITHMS: 'HS256' })).toEqual([]);
    });

    it('the page sign-in: a secret needs its client id (never echoed), the scope openid', () => {
      const problems = problemsOf({
        AUTH_MODE: 'oidc',
        ...OIDC,
        OIDC_CLIENT_SECRET: 'p4ge-s3cret',
      });
      expect(problems).toEqual([expect.stringMatching(/^OIDC_CLIENT_SECRET: set OIDC_CLIENT_ID/)]);
      expect(problems.join('\n')).not.toContain('p4ge-s3cret');
      expect(
        problemsOf({
          AUTH_MODE: 'oidc',
          ...OIDC,
          OIDC_CLIENT_ID: 'svc-page',
          OIDC_SCOPE: 'profile',
        }),
      ).toEqual([expect.stringMatching(/^OIDC_SCOPE=profile: must include openid/)]);
      expect(loadConfig({ AUTH_MODE: 'oidc', ...OIDC, OIDC_CLIENT_ID: 'svc-page' })).toMatchObject({
        oidcClientId: 'svc-page',
        oidcScope: 'openid profile',
        oidcSessionHours: 8,
      });
    });

    it.each(['HS256', 'RS256,none', 'RS256,HS512', ','])(
      'refuses OIDC_ALGORITHMS=%p: asymmetric algorithms only',
      (algorithms) => {
        expect(problemsOf({ AUTH_MODE: 'oidc', ...OIDC, OIDC_ALGORITHMS: algorithms })).toEqual([
          expect.stringMatching(/^OIDC_ALGORITHMS=.*list asymmetric algorithms only/),
        ]);
      },
    );
  });
});
