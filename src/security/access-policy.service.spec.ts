import type { SecurityConfig } from '../config/config-slices';
import {
  AccessDecision,
  AccessPolicyService,
  AccessQuestion,
  NO_ADMIN_MESSAGE,
} from './access-policy.service';
import type { Principal } from './principal';
import type { ApplicationSecurity, SecuritySettings } from '../config/security-settings';

const people = {
  userByPrincipal: 'ursula',
  appAdminByPrincipal: 'adam',
};
const RULES: ApplicationSecurity = {
  userPrincipals: [people.userByPrincipal],
  userRoles: ['analyst'],
  adminPrincipals: [people.appAdminByPrincipal],
  adminRoles: ['app-admin'],
};
const APPLICATIONS: Record<string, ApplicationSecurity> = {
  both: { ...RULES, functionCallAllowed: true, scriptSubmissionAllowed: true },
  scripts: { ...RULES, scriptSubmissionAllowed: true },
  calls: { ...RULES, functionCallAllowed: true },
  neither: { ...RULES },
};

function policy(overrides: Partial<SecuritySettings> = {}): AccessPolicyService {
  const settings: SecuritySettings = {
    authMode: 'basic',
    adminUser: 'root',
    adminPassword: 'root-password',
    users: {},
    apiKeys: {},
    globalAdmins: { principals: ['gina'], roles: ['ops'] },
    applicationSecurity: APPLICATIONS,
    authMaxFailures: 10,
    authFailureWindowSeconds: 60,
    ...overrides,
  };
  return new AccessPolicyService(settings as SecurityConfig);
}

const principal = (name: string, roles: string[] = [], source: Principal['source'] = 'user') => ({
  name,
  roles,
  source,
});
const PRINCIPALS: Record<string, Principal | null> = {
  anonymous: null,
  stranger: principal('mallory', ['guest']),
  userByPrincipal: principal('ursula'),
  userByRole: principal('rolf', ['analyst']),
  appAdminByPrincipal: principal('adam'),
  appAdminByRole: principal('ada', ['app-admin'], 'apiKey'),
  globalAdminByPrincipal: principal('gina'),
  globalAdminByRole: principal('otto', ['ops']),
  adminUser: principal('root', [], 'adminUser'),
};

type Action = 'script' | 'functionCall' | 'process' | 'read' | 'cancel';
function question(action: Action, application: string): AccessQuestion {
  switch (action) {
    case 'script':
    case 'functionCall':
      return { rule: 'submitJob', application, kind: action };
    case 'process':
      return { rule: 'functionCall', application };
    case 'read':
      return { rule: 'readResults', application };
    case 'cancel':
      return { rule: 'cancelJob', application };
  }
}

/** What the RSB model says, written out independently of the implementation. */
function expected(who: string, action: Action, application: string): AccessDecision['outcome'] {
  if (who === 'anonymous') {
    return 'authenticate';
  }
  if (who.startsWith('globalAdmin') || who === 'adminUser') {
    return 'allow';
  }
  const entry = APPLICATIONS[application];
  const isAdmin = entry !== undefined && who.startsWith('appAdmin');
  const isUser = isAdmin || (entry !== undefined && who.startsWith('user'));
  if (action === 'read') {
    return isUser ? 'allow' : 'hide';
  }
  if (action === 'cancel') {
    // Who may submit to the application (either kind), and its admins; others see nothing.
    if (!isUser) {
      return 'hide';
    }
    return isAdmin || entry.scriptSubmissionAllowed === true || entry.functionCallAllowed === true
      ? 'allow'
      : 'forbid';
  }
  if (!isUser) {
    return 'forbid';
  }
  const flag = action === 'script' ? entry.scriptSubmissionAllowed : entry.functionCallAllowed;
  return isAdmin || flag === true ? 'allow' : 'forbid';
}

describe('AccessPolicyService', () => {
  describe.each(['basic', 'apiKey'] as const)(
    'AUTH_MODE=%s: principal × action × application',
    (authMode) => {
      const service = policy({ authMode });
      const cases = Object.keys(PRINCIPALS).flatMap((who) =>
        (['script', 'functionCall', 'process', 'read', 'cancel'] as const).flatMap((action) =>
          [...Object.keys(APPLICATIONS), 'unlisted'].map((app) => [who, action, app] as const),
        ),
      );
      it.each(cases)('%s, %s on %s', (who, action, app) => {
        expect(service.decide(PRINCIPALS[who], question(action, app)).outcome).toBe(
          expected(who, action, app),
        );
      });
    },
  );

  it('says why a submission is refused', () => {
    const service = policy();
    expect(service.decide(PRINCIPALS.userByRole, question('script', 'calls'))).toEqual({
      outcome: 'forbid',
      message: expect.stringContaining('scriptSubmissionAllowed') as string,
    });
    expect(service.decide(PRINCIPALS.userByRole, question('process', 'scripts'))).toEqual({
      outcome: 'forbid',
      message: expect.stringContaining('functionCallAllowed') as string,
    });
  });

  it('AUTH_MODE=none: every job and result rule is open, even to the anonymous', () => {
    const service = policy({ authMode: 'none' });
    for (const action of ['script', 'functionCall', 'process', 'read'] as const) {
      for (const app of ['neither', 'unlisted']) {
        expect(service.decide(null, question(action, app)).outcome).toBe('allow');
      }
    }
  });

  describe('admin rules', () => {
    const admin = (
      service: AccessPolicyService,
      who: string,
      rule: 'globalAdmin' | 'applicationAdmin',
    ) =>
      service.decide(
        PRINCIPALS[who],
        rule === 'globalAdmin' ? { rule } : { rule, application: 'neither' },
      ).outcome;

    it('globalAdmin: only global admins; anonymous must authenticate', () => {
      const service = policy();
      expect(admin(service, 'anonymous', 'globalAdmin')).toBe('authenticate');
      for (const who of ['stranger', 'userByRole', 'appAdminByPrincipal', 'appAdminByRole']) {
        expect(admin(service, who, 'globalAdmin')).toBe('forbid');
      }
      for (const who of ['globalAdminByPrincipal', 'globalAdminByRole', 'adminUser']) {
        expect(admin(service, who, 'globalAdmin')).toBe('allow');
      }
    });

    it('applicationAdmin: the application admins and global admins', () => {
      const service = policy();
      expect(admin(service, 'anonymous', 'applicationAdmin')).toBe('authenticate');
      expect(admin(service, 'userByPrincipal', 'applicationAdmin')).toBe('forbid');
      for (const who of [
        'appAdminByPrincipal',
        'appAdminByRole',
        'globalAdminByRole',
        'adminUser',
      ]) {
        expect(admin(service, who, 'applicationAdmin')).toBe('allow');
      }
      expect(
        service.decide(PRINCIPALS.appAdminByPrincipal, {
          rule: 'applicationAdmin',
          application: 'unlisted',
        }).outcome,
      ).toBe('forbid');
    });

    it('AUTH_MODE=none: only ADMIN_USER is an admin', () => {
      const service = policy({ authMode: 'none' });
      expect(admin(service, 'anonymous', 'globalAdmin')).toBe('authenticate');
      expect(admin(service, 'adminUser', 'globalAdmin')).toBe('allow');
      expect(admin(service, 'adminUser', 'applicationAdmin')).toBe('allow');
      expect(admin(service, 'globalAdminByPrincipal', 'globalAdmin')).toBe('forbid');
      expect(admin(service, 'appAdminByPrincipal', 'applicationAdmin')).toBe('forbid');
    });

    it('with no admin configured at all: 403 that says how to configure one, even to the anonymous', () => {
      for (const service of [
        policy({ authMode: 'none', adminUser: null, adminPassword: null }),
        policy({ adminUser: null, adminPassword: null, globalAdmins: {}, applicationSecurity: {} }),
      ]) {
        for (const rule of ['globalAdmin', 'applicationAdmin'] as const) {
          expect(
            service.decide(null, rule === 'globalAdmin' ? { rule } : { rule, application: 'x' }),
          ).toEqual({ outcome: 'forbid', message: NO_ADMIN_MESSAGE });
        }
      }
      expect(NO_ADMIN_MESSAGE).toContain('ADMIN_USER and ADMIN_PASSWORD');
    });

    it('an application admin counts as configured for the application admin rule only', () => {
      const service = policy({ adminUser: null, adminPassword: null, globalAdmins: {} });
      expect(admin(service, 'anonymous', 'applicationAdmin')).toBe('authenticate');
      expect(admin(service, 'appAdminByRole', 'applicationAdmin')).toBe('allow');
      expect(service.decide(null, { rule: 'globalAdmin' })).toEqual({
        outcome: 'forbid',
        message: NO_ADMIN_MESSAGE,
      });
    });
  });

  it('public is open to all in every mode', () => {
    expect(policy().decide(null, { rule: 'public' }).outcome).toBe('allow');
  });

  it('does not treat inherited object keys as applications', () => {
    expect(policy().decide(PRINCIPALS.userByRole, question('read', 'constructor')).outcome).toBe(
      'hide',
    );
  });
});
