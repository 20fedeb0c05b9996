import type { SecurityConfig } from '../config/config-slices';
import {
  AccessDecision,
  AccessPolicyService,
  AccessQuestion,
  NO_ADMIN_MESSAGE,
} from './access-policy.service';
import { makePrincipal, type Principal } from './principal';
import type {
  ApplicationSecurity,
  PrincipalKind,
  SecuritySettings,
} from '../config/security-settings';

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

const principal = (name: string, roles: string[] = [], kind: PrincipalKind = 'user') =>
  makePrincipal(kind, name, roles);
/** The callers of the matrix, as callers of `kind` (the one kind the mode lets in). */
function principalsOf(kind: PrincipalKind): Record<string, Principal | null> {
  return {
    anonymous: null,
    stranger: principal('mallory', ['guest'], kind),
    userByPrincipal: principal('ursula', [], kind),
    userByRole: principal('rolf', ['analyst'], kind),
    appAdminByPrincipal: principal('adam', [], kind),
    appAdminByRole: principal('ada', ['app-admin'], kind),
    globalAdminByPrincipal: principal('gina', [], kind),
    globalAdminByRole: principal('otto', ['ops'], kind),
    adminUser: makePrincipal('user', 'root', [], true),
  };
}
const PRINCIPALS = principalsOf('user');

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
      const principals = principalsOf(authMode === 'basic' ? 'user' : 'key');
      const cases = Object.keys(PRINCIPALS).flatMap((who) =>
        (['script', 'functionCall', 'process', 'read', 'cancel'] as const).flatMap((action) =>
          [...Object.keys(APPLICATIONS), 'unlisted'].map((app) => [who, action, app] as const),
        ),
      );
      it.each(cases)('%s, %s on %s', (who, action, app) => {
        expect(service.decide(principals[who], question(action, app)).outcome).toBe(
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

  describe('principal kinds: a name is a caller only together with its kind', () => {
    const mixed = policy({
      authMode: 'basic,apiKey,oidc',
      globalAdmins: { principals: ['user:gina'] },
      applicationSecurity: {
        lab: {
          userPrincipals: ['user:ursula', 'oidc:olga', 'client:reporting', 'key:reporting'],
          adminPrincipals: ['user:adam'],
        },
        legacy: { userPrincipals: ['ursula'] },
      },
    });

    it("a token or key spelling a Basic global admin's name is not a global admin", () => {
      expect(mixed.isGlobalAdmin(makePrincipal('user', 'gina', []))).toBe(true);
      for (const kind of ['key', 'oidc', 'client'] as const) {
        const impostor = makePrincipal(kind, 'gina', []);
        expect(mixed.isGlobalAdmin(impostor)).toBe(false);
        expect(mixed.decide(impostor, { rule: 'globalAdmin' })).toEqual({
          outcome: 'forbid',
          message: `${kind}:gina is not a global admin.`,
        });
      }
    });

    it("another kind's caller of the same name cannot read an application's results", () => {
      const read = (kind: PrincipalKind, name: string) =>
        mixed.decide(makePrincipal(kind, name, []), question('read', 'lab')).outcome;
      expect(read('user', 'ursula')).toBe('allow');
      expect(read('oidc', 'ursula')).toBe('hide');
      expect(read('client', 'ursula')).toBe('hide');
      expect(read('oidc', 'olga')).toBe('allow');
      expect(read('user', 'olga')).toBe('hide');
      expect(read('client', 'reporting')).toBe('allow');
      expect(read('key', 'reporting')).toBe('allow');
      expect(read('oidc', 'reporting')).toBe('hide');
      expect(
        mixed.decide(makePrincipal('oidc', 'adam', []), {
          rule: 'applicationAdmin',
          application: 'lab',
        }).outcome,
      ).toBe('forbid');
    });

    it('a bare name names nobody where more than one kind of caller could carry it', () => {
      // Refused at start and by PUT; a stored entry of another AUTH_MODE may still hold one.
      for (const kind of ['user', 'oidc'] as const) {
        expect(
          mixed.decide(makePrincipal(kind, 'ursula', []), question('read', 'legacy')).outcome,
        ).toBe('hide');
      }
    });

    it('a bare name is the one kind the mode lets in', () => {
      const keysOnly = policy({
        authMode: 'apiKey',
        globalAdmins: { principals: ['gina', 'key:kim'] },
      });
      expect(keysOnly.isGlobalAdmin(makePrincipal('key', 'gina', []))).toBe(true);
      expect(keysOnly.isGlobalAdmin(makePrincipal('key', 'kim', []))).toBe(true);
      expect(keysOnly.isGlobalAdmin(makePrincipal('user', 'gina', []))).toBe(false);
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

  describe('anyAdmin (the operator console)', () => {
    it('lets in global admins and the admins of any application, by name or role', () => {
      const p = policy();
      expect(p.decide(principal('gina'), { rule: 'anyAdmin' }).outcome).toBe('allow');
      expect(p.decide(principal('adam'), { rule: 'anyAdmin' }).outcome).toBe('allow');
      expect(p.decide(principal('x', ['app-admin']), { rule: 'anyAdmin' }).outcome).toBe('allow');
    });

    it('forbids a user of applications, asks an anonymous caller to authenticate', () => {
      const p = policy();
      expect(p.decide(principal('ursula'), { rule: 'anyAdmin' })).toEqual({
        outcome: 'forbid',
        message: 'user:ursula is not an admin of any application.',
      });
      expect(p.decide(null, { rule: 'anyAdmin' }).outcome).toBe('authenticate');
    });

    it('says how to configure an admin when nobody could be one', () => {
      const none = policy({
        adminUser: null,
        globalAdmins: {},
        applicationSecurity: { lab: { userPrincipals: ['ursula'] } },
      });
      expect(none.decide(principal('ursula'), { rule: 'anyAdmin' })).toEqual({
        outcome: 'forbid',
        message: NO_ADMIN_MESSAGE,
      });
    });

    it('lists the applications a principal administers, as the rules read now', () => {
      const security: Record<string, ApplicationSecurity> = {
        lab: { adminPrincipals: ['adam'] },
        ops: { adminRoles: ['app-admin'] },
        open: { userPrincipals: ['adam'] },
      };
      const p = policy({ applicationSecurity: security });
      expect(p.administeredApplications(principal('adam', ['app-admin']))).toEqual(['lab', 'ops']);
      expect(p.administeredApplications(principal('ursula'))).toEqual([]);
      // Rights stored at run time replace the map's entries in place: read on each call.
      security.open = { adminPrincipals: ['adam'] };
      expect(p.administeredApplications(principal('adam'))).toEqual(['lab', 'open']);
      expect(policy({ authMode: 'none' }).administeredApplications(principal('adam'))).toEqual([]);
    });
  });
});
