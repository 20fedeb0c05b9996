import { Test } from '@nestjs/testing';
import { load } from 'js-yaml';
import { loadConfig } from '../config/app-config';
import { ConfigModule } from '../config/config.module';
import type { OpenApiDocument } from './openapi-objects';
import { OpenApiService } from './openapi.service';

async function openApiService(env: NodeJS.ProcessEnv = {}): Promise<OpenApiService> {
  const module = await Test.createTestingModule({
    imports: [ConfigModule.forConfig(loadConfig(env))],
    providers: [OpenApiService],
  }).compile();
  return module.get(OpenApiService);
}

const serverOf = (document: OpenApiDocument): string | undefined => document.servers[0]?.url;

describe('OpenApiService', () => {
  it('fills in the base URL each request is served under, in JSON and in YAML', async () => {
    const openApi = await openApiService();
    const bases = ['https://a.example.org', 'http://10.0.0.5:3000', 'https://b.example.org'];
    for (const base of [...bases, ...bases.reverse()]) {
      const json = JSON.parse(openApi.json(base)) as OpenApiDocument;
      const yaml = load(openApi.yaml(base)) as OpenApiDocument;
      expect(serverOf(json)).toBe(`${base}/svc/api/rest`);
      expect(yaml).toEqual(json);
    }
  });

  it('renders a base URL again after many others came between', async () => {
    const openApi = await openApiService();
    const first = openApi.json('https://first.example.org');
    for (let i = 0; i < 20; i++) {
      expect(
        serverOf(JSON.parse(openApi.json(`https://n${i}.example.org`)) as OpenApiDocument),
      ).toBe(`https://n${i}.example.org/svc/api/rest`);
    }
    expect(openApi.json('https://first.example.org')).toBe(first);
    expect(first).not.toContain('n0.example.org');
  });

  it('states the longest wait RESULT_WAIT_MAX_SECONDS allows', async () => {
    const openApi = await openApiService({ RESULT_WAIT_MAX_SECONDS: '42' });
    expect(openApi.json('https://svc.example.org')).toContain('"maximum": 42');
  });
});
