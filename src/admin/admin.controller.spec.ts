import { AppConfig } from '../config/app-config';
import { AdminConfig, NodeConfig } from '../config/config-slices';
import { HttpAnswer } from '../common/http-answer';
import { apiErrorOf, BASE, controllerOf, fakeRequest } from '../../test/support/controller-testing';
import { AdminController } from './admin.controller';
import { CatalogAdminService } from './catalog-admin.service';
import { CatalogRepresentation } from './catalog-view';

const APP = { 'X-SVC-Application-Name': 'app' };

describe('AdminController', () => {
  let catalog: Record<string, jest.Mock>;
  let controller: AdminController;

  beforeEach(async () => {
    catalog = {
      view: jest.fn().mockResolvedValue({ directories: [] }),
      read: jest.fn().mockResolvedValue(Buffer.from('x <- 1')),
      write: jest.fn(),
      remove: jest.fn(),
    };
    controller = await controllerOf(AdminController, [
      { provide: NodeConfig, useValue: { publicBaseUrl: BASE } },
      { provide: AdminConfig, useValue: { catalogMaxFileBytes: 10 } },
      {
        provide: AppConfig,
        useValue: { port: 8080, databaseUrl: 'postgres://svc:pw@db/svc', smtpPassword: 'pw' },
      },
      { provide: CatalogAdminService, useValue: catalog },
    ]);
  });

  it("lists the application's catalog with links under the public base URL", async () => {
    const view = await controller.listCatalog(fakeRequest({ headers: APP }));
    expect(catalog.view).toHaveBeenCalledWith('app', BASE);
    expect(view).toBeInstanceOf(CatalogRepresentation);
  });

  it('answers a file as text or bytes by its extension, its path joined from the segments', async () => {
    const text = await controller.readFile(fakeRequest({ headers: APP }), 'scripts', ['a', 'b.R']);
    expect(catalog.read).toHaveBeenCalledWith('app', 'scripts', 'a/b.R');
    expect(text.headers).toEqual({ 'Content-Type': 'text/plain; charset=utf-8' });
    const bytes = await controller.readFile(fakeRequest({ headers: APP }), 'data', ['x.rds']);
    expect(bytes.headers).toEqual({ 'Content-Type': 'application/octet-stream' });
  });

  it('writes the body: 201 with Location when new, 204 when replaced', async () => {
    catalog.write.mockResolvedValueOnce(true).mockResolvedValueOnce(false);
    const created = await controller.writeFile(
      fakeRequest({ method: 'PUT', headers: APP, body: 'x <- 2' }),
      'scripts',
      ['new file.R'],
    );
    expect(catalog.write).toHaveBeenCalledWith(
      'app',
      'scripts',
      'new file.R',
      Buffer.from('x <- 2'),
    );
    expect(created).toEqual(
      new HttpAnswer(null, {
        status: 201,
        headers: { Location: `${BASE}/svc/api/rest/admin/catalog/scripts/new%20file.R` },
      }),
    );
    const replaced = await controller.writeFile(
      fakeRequest({ method: 'PUT', headers: APP, body: 'y' }),
      'scripts',
      ['a.R'],
    );
    expect(replaced.status).toBe(204);
  });

  it('answers 413 for a file over CATALOG_MAX_FILE_BYTES without writing it', async () => {
    const error = await apiErrorOf(() =>
      controller.writeFile(
        fakeRequest({ method: 'PUT', headers: APP, body: '0123456789ab' }),
        'scripts',
        ['a.R'],
      ),
    );
    expect(error).toEqual({
      status: 413,
      message: 'A catalog file may have at most 10 bytes (CATALOG_MAX_FILE_BYTES).',
    });
    expect(catalog.write).not.toHaveBeenCalled();
  });

  it('deletes a file', async () => {
    await controller.deleteFile(fakeRequest({ headers: APP }), 'scripts', ['a', 'b.R']);
    expect(catalog.remove).toHaveBeenCalledWith('app', 'scripts', 'a/b.R');
  });

  it('shows the effective configuration with its secrets masked', () => {
    expect(controller.configuration()).toEqual({
      port: 8080,
      databaseUrl: 'postgres://svc:********@db/svc',
      smtpPassword: '********',
    });
  });
});
