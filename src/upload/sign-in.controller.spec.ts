import { NodeConfig } from '../config/config-slices';
import { RequestAccessService } from '../security/request-access.service';
import { apiErrorOf, BASE, controllerOf, fakeRequest } from '../../test/support/controller-testing';
import { SignInController } from './sign-in.controller';
import { SignInService } from './sign-in.service';

const STATE = 'a'.repeat(40);

describe('SignInController', () => {
  let signIn: {
    enabled: boolean;
    sessionLifetimeMs: number;
    start: jest.Mock;
    finish: jest.Mock;
    signOut: jest.Mock;
  };
  let principalOf: jest.Mock;
  let controller: SignInController;

  beforeEach(async () => {
    signIn = {
      enabled: true,
      sessionLifetimeMs: 3_600_000,
      start: jest.fn().mockResolvedValue({ signInState: STATE, location: 'https://idp/auth' }),
      finish: jest.fn().mockResolvedValue({ sessionId: 'session-0123456789abcdefghij' }),
      signOut: jest.fn(),
    };
    principalOf = jest.fn();
    controller = await controllerOf(SignInController, [
      { provide: SignInService, useValue: signIn },
      { provide: RequestAccessService, useValue: { principalOf } },
      { provide: NodeConfig, useValue: { publicBaseUrl: BASE } },
    ]);
  });

  const cookieOptions = { httpOnly: true, sameSite: 'lax', secure: true };

  it("starts at the provider with the callback's URL, the sign-in's state in a cookie", async () => {
    const redirect = await controller.start(fakeRequest());
    expect(signIn.start).toHaveBeenCalledWith(`${BASE}/svc/sign-in/callback`);
    expect(redirect).toEqual({
      url: 'https://idp/auth',
      statusCode: 303,
      cookies: [
        {
          name: 'svc_sign_in',
          value: STATE,
          options: { ...cookieOptions, path: '/svc/sign-in', maxAge: 600_000 },
        },
      ],
    });
  });

  it('finishes with the state cookie and the URL called back, then sets the session', async () => {
    const req = fakeRequest({
      path: '/svc/sign-in/callback?code=c&state=s',
      headers: { Cookie: `other=1; svc_sign_in=${STATE}` },
    });
    const redirect = await controller.callback(req);
    expect(signIn.finish).toHaveBeenCalledWith(
      STATE,
      new URL(`${BASE}/svc/sign-in/callback?code=c&state=s`),
    );
    expect(redirect.url).toBe('/svc/');
    expect(redirect.cookies).toEqual([
      { name: 'svc_sign_in', value: null, options: { ...cookieOptions, path: '/svc/sign-in' } },
      {
        name: 'svc_session',
        value: 'session-0123456789abcdefghij',
        options: { ...cookieOptions, path: '/svc', maxAge: 3_600_000 },
      },
    ]);
  });

  it('answers 404 when signing in is not configured', async () => {
    signIn.enabled = false;
    expect(await apiErrorOf(() => controller.start(fakeRequest()))).toMatchObject({
      status: 404,
    });
    expect(signIn.start).not.toHaveBeenCalled();
  });

  it("signs the session out and clears its cookie (another site's form: the access guard)", async () => {
    const req = fakeRequest({
      method: 'POST',
      headers: { Cookie: 'svc_session=session-0123456789abcdefghij' },
    });
    const redirect = await controller.signOut(req);
    expect(signIn.signOut).toHaveBeenCalledWith('session-0123456789abcdefghij');
    expect(redirect.cookies).toEqual([
      { name: 'svc_session', value: null, options: { ...cookieOptions, path: '/svc' } },
    ]);
    expect(principalOf).not.toHaveBeenCalled();
  });

  it("shows a signed-in user's name and roles, nobody without a session", async () => {
    principalOf.mockResolvedValue({ source: 'oidc', name: 'alice', roles: ['admin'] });
    expect(
      await controller.session(
        fakeRequest({ headers: { Cookie: 'svc_session=session-0123456789abcdefghij' } }),
      ),
    ).toEqual({ signInAvailable: true, principal: 'alice', roles: ['admin'] });
    expect(await controller.session(fakeRequest())).toEqual({
      signInAvailable: true,
      principal: null,
      roles: [],
    });
    expect(principalOf).toHaveBeenCalledTimes(1);
  });
});
