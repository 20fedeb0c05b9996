import type { Request } from 'express';
import type { SecurityConfig } from '../config/config-slices';
import { AuthenticationService } from './authentication.service';
import { OidcTokenVerifier } from './oidc-token.verifier';
import crypto from 'node:crypto';
import { makePrincipal } from './principal';
import { hashSecret, SCRYPT_DEFAULTS } from '../common/secret-hash';
import type { SecuritySettings } from '../config/security-settings';
import type { AdminAccountsService } from './admin-accounts.service';

const CHEAP = { N: 1024, r: 8, p: 1 };

/** The parts of a request authentication reads: the raw headers and the client address. */
function requestWith(headers: Array<[string, string]>, ip = '10.0.0.1'): Request {
  return { rawHeaders: headers.flat(), ip, socket: {} } as unknown as Request;
}
const basic = (name: string, secret: string): [string, string] => [
  'Authorization',
  `Basic ${Buffer.from(`${name}:${secret}`).toString('base64')}`,
];

async function service(overrides: Partial<SecuritySettings> = {}): Promise<AuthenticationService> {
  const settings: SecuritySettings = {
    authMode: 'basic',
    adminUser: 'root',
    adminPassword: 'root-password',
    users: {
      alice: { passwordHash: await hashSecret('alice-password', CHEAP), roles: ['analyst'] },
    },
    apiKeys: { k1: { principal: 'reporting', keyHash: await hashSecret('key-secret', CHEAP) } },
    globalAdmins: {},
    applicationSecurity: {},
    authMaxFailures: 3,
    authFailureWindowSeconds: 60,
    ...overrides,
  };
  return new AuthenticationService(
    settings as SecurityConfig,
    new OidcTokenVerifier(settings as SecurityConfig),
  );
}

describe('AuthenticationService', () => {
  it('basic mode: configured users and ADMIN_USER; nothing else', async () => {
    const auth = await service();
    await expect(auth.authenticate(requestWith([]))).resolves.toEqual({ kind: 'anonymous' });
    await expect(
      auth.authenticate(requestWith([basic('alice', 'alice-password')])),
    ).resolves.toEqual({
      kind: 'authenticated',
      principal: makePrincipal('user', 'alice', ['analyst']),
    });
    await expect(auth.authenticate(requestWith([basic('root', 'root-password')]))).resolves.toEqual(
      {
        kind: 'authenticated',
        principal: makePrincipal('user', 'root', [], true),
      },
    );
    const failing = [
      [basic('alice', 'wrong')],
      [basic('nobody', 'alice-password')],
      [basic('root', 'alice-password')],
      [['X-SVC-API-Key', 'k1.key-secret']],
      [['Authorization', 'Digest username="alice"']],
      [['Authorization', 'Basic bm9jb2xvbg==']], // "nocolon"
      [basic('alice', 'alice-password'), ['X-SVC-API-Key', 'k1.key-secret']],
    ] as Array<Array<[string, string]>>;
    for (const [index, headers] of failing.entries()) {
      // Each from its own address, so none is merely throttled.
      expect((await auth.authenticate(requestWith(headers, `10.0.1.${index}`))).kind).toBe(
        'failed',
      );
    }
  });

  it('apiKey mode: keys by header or Bearer, ADMIN_USER by Basic, users not at all', async () => {
    const auth = await service({ authMode: 'apiKey' });
    const reporting = {
      kind: 'authenticated',
      principal: makePrincipal('key', 'reporting', []),
    };
    await expect(
      auth.authenticate(requestWith([['X-SVC-API-Key', 'k1.key-secret']])),
    ).resolves.toEqual(reporting);
    await expect(
      auth.authenticate(requestWith([['Authorization', 'Bearer k1.key-secret']])),
    ).resolves.toEqual(reporting);
    expect((await auth.authenticate(requestWith([basic('root', 'root-password')]))).kind).toBe(
      'authenticated',
    );
    const failing = [
      [basic('alice', 'alice-password')],
      [['X-SVC-API-Key', 'k1.wrong']],
      [['X-SVC-API-Key', 'k2.key-secret']],
      [['X-SVC-API-Key', 'no-dot']],
    ] as Array<Array<[string, string]>>;
    for (const [index, headers] of failing.entries()) {
      expect((await auth.authenticate(requestWith(headers, `10.0.2.${index}`))).kind).toBe(
        'failed',
      );
    }
  });

  it('mode none: only ADMIN_USER authenticates', async () => {
    const auth = await service({ authMode: 'none' });
    expect((await auth.authenticate(requestWith([basic('root', 'root-password')]))).kind).toBe(
      'authenticated',
    );
    expect((await auth.authenticate(requestWith([basic('alice', 'alice-password')]))).kind).toBe(
      'failed',
    );
  });

  it('throttles an address after the configured failures, even with the right password', async () => {
    const auth = await service();
    for (let i = 0; i < 3; i++) {
      expect((await auth.authenticate(requestWith([basic('alice', 'x')], '10.9.9.9'))).kind).toBe(
        'failed',
      );
    }
    const right = await auth.authenticate(
      requestWith([basic('alice', 'alice-password')], '10.9.9.9'),
    );
    expect(right).toEqual({ kind: 'throttled', retryAfterSeconds: 60 });
    const elsewhere = await auth.authenticate(
      requestWith([basic('alice', 'alice-password')], '10.9.9.8'),
    );
    expect(elsewhere.kind).toBe('authenticated');
  });

  it('does not take inherited object keys for users or keys', async () => {
    const auth = await service({ authMode: 'apiKey' });
    expect((await auth.authenticate(requestWith([['X-SVC-API-Key', 'constructor.x']]))).kind).toBe(
      'failed',
    );
  });
});

describe('AuthenticationService: refused API keys', () => {
  it('spends the same scrypt on an unknown key id as on a known id with a wrong secret', async () => {
    // Timing is not asserted (a shared machine); the work that makes it is: one scrypt
    // derivation at the same cost for each refusal, whether the id exists or not.
    const auth = await service({
      authMode: 'apiKey',
      apiKeys: { k1: { principal: 'reporting', keyHash: await hashSecret('key-secret') } },
    });
    const derivations = jest.spyOn(crypto, 'scrypt');
    let client = 0;
    const costsOf = async (key: string): Promise<number[]> => {
      derivations.mockClear();
      client += 1;
      await expect(
        auth.authenticate(requestWith([['X-SVC-API-Key', key]], `10.0.0.${client}`)),
      ).resolves.toMatchObject({ kind: 'failed' });
      return derivations.mock.calls.map((call) => (call[3] as { N: number }).N);
    };
    await costsOf('warm.up'); // makes the unknown ids' stand-in hash once
    const knownWrong = await costsOf('k1.wrong-secret');
    const unknown = await costsOf('k9.wrong-secret');
    expect(knownWrong).toEqual([SCRYPT_DEFAULTS.N]);
    expect(unknown).toEqual(knownWrong);
    derivations.mockRestore();
  });
});

describe('AuthenticationService: admins made at run time', () => {
  /** Accounts as the database holds them: ops, and (shadowed) alice of USERS. */
  const accounts = {
    check: (name: string, secret: string) =>
      Promise.resolve(name === 'ops' || name === 'alice' ? secret === `${name}-generated` : null),
  } as unknown as AdminAccountsService;

  async function withAccounts(mode: SecuritySettings['authMode']): Promise<AuthenticationService> {
    const settings = {
      authMode: mode,
      adminUser: null,
      adminPassword: null,
      users: {
        alice: { passwordHash: await hashSecret('alice-password', CHEAP), roles: ['analyst'] },
      },
      apiKeys: {},
      globalAdmins: {},
      applicationSecurity: {},
      authMaxFailures: 100,
      authFailureWindowSeconds: 60,
    } as unknown as SecurityConfig;
    return new AuthenticationService(
      settings,
      new OidcTokenVerifier(settings),
      undefined,
      accounts,
    );
  }

  it.each(['none', 'basic', 'apiKey'] as const)(
    'signs one in with Basic as a global admin in mode %s; a wrong password is refused',
    async (mode) => {
      const auth = await withAccounts(mode);
      await expect(
        auth.authenticate(requestWith([basic('ops', 'ops-generated')])),
      ).resolves.toEqual({
        kind: 'authenticated',
        principal: makePrincipal('user', 'ops', [], true),
      });
      expect((await auth.authenticate(requestWith([basic('ops', 'guess')]))).kind).toBe('failed');
    },
  );

  it('never takes an account for a user of USERS by the same name', async () => {
    const auth = await withAccounts('basic');
    expect((await auth.authenticate(requestWith([basic('alice', 'alice-generated')]))).kind).toBe(
      'failed',
    );
    await expect(
      auth.authenticate(requestWith([basic('alice', 'alice-password')])),
    ).resolves.toEqual({
      kind: 'authenticated',
      principal: makePrincipal('user', 'alice', ['analyst']),
    });
  });
});
