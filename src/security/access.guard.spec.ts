import type { ExecutionContext } from '@nestjs/common';
import type { Reflector } from '@nestjs/core';
import type { Request } from 'express';
import type { NodeConfig, SecurityConfig } from '../config/config-slices';
import { apiErrorOf, fakeRequest } from '../../test/support/controller-testing';
import { AccessGuard } from './access.guard';
import type { AccessRule } from './access.decorator';
import { AccessPolicyService } from './access-policy.service';
import type { AuthenticationService } from './authentication.service';
import { RequestAccessService } from './request-access.service';

const BASIC = 'Basic YWRtaW46c2VjcmV0';

describe('AccessGuard and requests from another site', () => {
  const config = {
    authMode: 'basic',
    oidcClientId: null,
    adminUser: 'admin',
    adminPassword: 'secret',
    users: {},
    apiKeys: {},
    applicationSecurity: {},
    globalAdmins: { principals: [], roles: [] },
  } as unknown as SecurityConfig;
  let authenticate: jest.Mock;

  function guardFor(rule: AccessRule): AccessGuard {
    const policy = new AccessPolicyService(config);
    authenticate = jest.fn().mockResolvedValue({ kind: 'anonymous' });
    const access = new RequestAccessService(
      config,
      { publicBaseUrl: 'https://svc.example' } as NodeConfig,
      policy,
      { authenticate } as unknown as AuthenticationService,
    );
    const reflector = { getAllAndOverride: () => rule } as unknown as Reflector;
    return new AccessGuard(reflector, config, policy, access);
  }

  function contextOf(req: Request): ExecutionContext {
    return {
      getHandler: () => undefined,
      getClass: () => undefined,
      switchToHttp: () => ({ getRequest: () => req }),
    } as unknown as ExecutionContext;
  }

  const crossSite = (method: string) =>
    fakeRequest({
      method,
      headers: {
        Authorization: BASIC,
        'Sec-Fetch-Site': 'cross-site',
        Origin: 'https://evil.example',
      },
    });

  it.each<AccessRule>(['public', 'submitJob', 'globalAdmin', 'readResults'])(
    'refuses a POST with Basic from another site on a %s route before authenticating',
    async (rule) => {
      const error = await apiErrorOf(() =>
        guardFor(rule).canActivate(contextOf(crossSite('POST'))),
      );
      expect(error).toMatchObject({ status: 403 });
      expect(error.message).toMatch(/must come from the page of this service/);
      expect(authenticate).not.toHaveBeenCalled();
    },
  );

  it('lets the same GET through to the rule', async () => {
    expect(await guardFor('public').canActivate(contextOf(crossSite('GET')))).toBe(true);
  });
});
