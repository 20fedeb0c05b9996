import { NodeConfig } from '../config/config-slices';
import { makePrincipal, rememberPrincipal } from '../security/principal';
import { BASE, controllerOf, fakeRequest } from '../../test/support/controller-testing';
import { PackagesController } from './packages.controller';
import { PackagesRepresentation } from './packages-view';
import { PackagesService } from './packages.service';

const APP = { 'X-SVC-Application-Name': 'app' };

describe('PackagesController', () => {
  let packages: Record<string, jest.Mock>;
  let controller: PackagesController;

  beforeEach(async () => {
    packages = { list: jest.fn().mockResolvedValue([]), upload: jest.fn(), remove: jest.fn() };
    controller = await controllerOf(PackagesController, [
      { provide: NodeConfig, useValue: { publicBaseUrl: BASE } },
      { provide: PackagesService, useValue: packages },
    ]);
  });

  it("lists the application's packages", async () => {
    expect(await controller.list(fakeRequest({ headers: APP }))).toBeInstanceOf(
      PackagesRepresentation,
    );
    expect(packages.list).toHaveBeenCalledWith('app');
  });

  it('hands the upload its type, a body reader and who sends it: 201 with Location when new', async () => {
    packages.upload.mockImplementation(
      async (_app: string, _name: string, _type: string, body: () => Promise<Buffer>) =>
        (await body()).toString() === 'tarball',
    );
    const req = fakeRequest({
      method: 'PUT',
      headers: { ...APP, 'Content-Type': 'application/gzip' },
      body: 'tarball',
    });
    rememberPrincipal(req, makePrincipal('user', 'alice', []));
    const answer = await controller.upload(req, 'mypkg');
    expect(packages.upload).toHaveBeenCalledWith(
      'app',
      'mypkg',
      'application/gzip',
      expect.any(Function),
      'user:alice',
    );
    expect(answer.status).toBe(201);
    expect(answer.headers).toEqual({ Location: `${BASE}/svc/api/rest/admin/packages/mypkg` });
  });

  it('uploads as anonymous without a principal; 204 when a version was replaced', async () => {
    packages.upload.mockResolvedValue(false);
    const answer = await controller.upload(fakeRequest({ headers: APP }), 'mypkg');
    expect(packages.upload.mock.calls[0][4]).toBe('anonymous');
    expect(answer.status).toBe(204);
  });

  it('removes a package', async () => {
    await controller.remove(fakeRequest({ headers: APP }), 'mypkg');
    expect(packages.remove).toHaveBeenCalledWith('app', 'mypkg');
  });
});
