import type { ApplicationEntryDto } from '../applications/application-entry.dto';
import { ApplicationSettingsService } from '../applications/application-settings.service';
import { apiErrorOf, controllerOf, fakeRequest } from '../../test/support/controller-testing';
import { ApplicationsController } from './applications.controller';
import { ApplicationsDirectory } from './applications-directory.service';

const BODY = { settings: {} } as unknown as ApplicationEntryDto;

describe('ApplicationsController', () => {
  let settings: Record<string, jest.Mock>;
  let directory: Record<string, jest.Mock>;
  let controller: ApplicationsController;

  beforeEach(async () => {
    settings = {
      view: jest.fn().mockResolvedValue({ application: 'app', version: 3, source: 'stored' }),
      replace: jest.fn().mockResolvedValue({
        view: { application: 'app', version: 4 },
        restartRequired: false,
      }),
    };
    directory = {
      list: jest.fn().mockResolvedValue([{ application: 'app' }]),
      exists: jest.fn().mockResolvedValue(true),
    };
    controller = await controllerOf(ApplicationsController, [
      { provide: ApplicationSettingsService, useValue: settings },
      { provide: ApplicationsDirectory, useValue: directory },
    ]);
  });

  it('lists the applications the directory knows', async () => {
    expect(await controller.list()).toEqual({ applications: [{ application: 'app' }] });
  });

  it("reads an application's settings with their version as ETag, 404 for an unknown one", async () => {
    const answer = await controller.read('app');
    expect(answer.headers).toEqual({ ETag: '"3"' });
    expect(answer.body).toMatchObject({ version: 3 });
    directory.exists.mockResolvedValue(false);
    expect(await apiErrorOf(() => controller.read('nope'))).toMatchObject({ status: 404 });
  });

  it('replaces under If-Match, as the principal asking, with the new ETag', async () => {
    const req = fakeRequest({ method: 'PUT', headers: { 'If-Match': '"3"' } });
    const answer = await controller.replace('app', req, BODY);
    expect(settings.replace).toHaveBeenCalledWith('app', BODY, '"3"', null);
    expect(answer.headers).toEqual({ ETag: '"4"' });
    expect(answer.body).toEqual({ application: 'app', version: 4, restartRequired: false });
  });

  it('creates with If-None-Match: * as version 0, even for a name nothing knows yet', async () => {
    settings.view.mockResolvedValue({ version: 0, source: 'configured' });
    directory.exists.mockResolvedValue(false);
    await controller.replace('new_app', fakeRequest({ headers: { 'If-None-Match': '*' } }), BODY);
    expect(settings.replace).toHaveBeenCalledWith('new_app', BODY, '"0"', null);
  });

  it('answers 412 to a creation of stored settings, 404 to a replacement of unknown ones', async () => {
    const create = fakeRequest({ headers: { 'If-None-Match': '*' } });
    expect(await apiErrorOf(() => controller.replace('app', create, BODY))).toMatchObject({
      status: 412,
    });
    directory.exists.mockResolvedValue(false);
    expect(await apiErrorOf(() => controller.replace('gone', fakeRequest(), BODY))).toMatchObject({
      status: 404,
    });
    expect(settings.replace).not.toHaveBeenCalled();
  });
});
