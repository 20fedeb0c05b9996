import { ApiKeysService } from '../api-keys/api-keys.service';
import type { NewApiKeyDto } from '../api-keys/new-api-key.dto';
import { rememberPrincipal, makePrincipal } from '../security/principal';
import { apiErrorOf, controllerOf, fakeRequest } from '../../test/support/controller-testing';
import { ApiKeysController } from './api-keys.controller';

const LISTING = {
  id: 'k1',
  principal: 'robot',
  roles: ['submitter'],
  createdAt: new Date('2026-11-01T00:00:00Z'),
  createdBy: 'root',
  expiresAt: null,
  lastUsedAt: new Date('2026-11-02T00:00:00Z'),
};

describe('ApiKeysController', () => {
  let keys: Record<string, jest.Mock>;
  let controller: ApiKeysController;

  beforeEach(async () => {
    keys = {
      create: jest.fn().mockResolvedValue({ key: 'svc_secret', listing: LISTING }),
      list: jest.fn().mockResolvedValue([LISTING]),
      revoke: jest.fn(),
    };
    controller = await controllerOf(ApiKeysController, [
      { provide: ApiKeysService, useValue: keys },
    ]);
  });

  const VIEW = {
    id: 'k1',
    principal: 'robot',
    roles: ['submitter'],
    createdAt: '2026-11-01T00:00:00.000Z',
    createdBy: 'root',
    expiresAt: null,
    lastUsedAt: '2026-11-02T00:00:00.000Z',
  };

  it('creates a key as the principal asking: 201, its secret once, its Location', async () => {
    const req = fakeRequest({ method: 'POST' });
    rememberPrincipal(req, makePrincipal('user', 'root', ['admin']));
    const body = { principal: 'robot' } as NewApiKeyDto;
    const answer = await controller.create(req, body);
    expect(keys.create).toHaveBeenCalledWith(body, 'user:root');
    expect(answer.status).toBe(201);
    expect(answer.headers).toEqual({ Location: '/svc/api/rest/admin/api-keys/k1' });
    expect(answer.body).toEqual({ key: 'svc_secret', ...VIEW });
  });

  it('lists the keys without secrets, times in ISO 8601', async () => {
    expect(await controller.list()).toEqual({ apiKeys: [VIEW] });
  });

  it('revokes a key, and answers 404 for an unknown or malformed id', async () => {
    keys.revoke.mockResolvedValueOnce(true).mockResolvedValueOnce(false);
    await controller.revoke('k1');
    expect(keys.revoke).toHaveBeenCalledWith('k1');
    expect(await apiErrorOf(() => controller.revoke('k2'))).toMatchObject({ status: 404 });
    expect(await apiErrorOf(() => controller.revoke('a/b'))).toEqual({
      status: 404,
      message: 'No API key a/b (keys of API_KEYS cannot be revoked here).',
    });
    expect(keys.revoke).toHaveBeenCalledTimes(2);
  });
});
