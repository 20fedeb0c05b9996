import { RestApiConfig } from '../config/config-slices';
import { BASE, controllerOf, fakeRequest } from '../../test/support/controller-testing';
import { OpenApiController } from './openapi.controller';
import { OpenApiService } from './openapi.service';

describe('OpenApiController', () => {
  it('answers the description for the public base URL as JSON and as YAML', async () => {
    const openApi = {
      json: jest.fn().mockReturnValue('{}'),
      yaml: jest.fn().mockReturnValue('a: 1\n'),
    };
    const controller = await controllerOf(OpenApiController, [
      { provide: RestApiConfig, useValue: { publicBaseUrl: `${BASE}/` } },
      { provide: OpenApiService, useValue: openApi },
    ]);
    const json = controller.json(fakeRequest());
    expect(openApi.json).toHaveBeenCalledWith(BASE);
    expect(json.body).toBe('{}');
    expect(json.headers).toEqual({ 'Content-Type': 'application/json; charset=utf-8' });
    const yaml = controller.yaml(fakeRequest());
    expect(openApi.yaml).toHaveBeenCalledWith(BASE);
    expect(yaml.body).toBe('a: 1\n');
    expect(yaml.headers).toEqual({ 'Content-Type': 'application/yaml; charset=utf-8' });
  });
});
