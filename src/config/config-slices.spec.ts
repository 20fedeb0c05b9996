import { Test } from '@nestjs/testing';
import { loadConfig } from './app-config';
import {
  ApplicationsConfig,
  CONFIG_SLICES,
  DatabaseConfig,
  QueueConfig,
  REngineConfig,
} from './config-slices';
import { ConfigModule } from './config.module';

describe('configuration slices', () => {
  async function moduleFor(env: NodeJS.ProcessEnv) {
    const config = loadConfig(env);
    const module = await Test.createTestingModule({
      imports: [ConfigModule.forConfig(config)],
    }).compile();
    return { config, module };
  }

  it('gives each slice its keys of the loaded configuration, and nothing else', async () => {
    const { config, module } = await moduleFor({ POLL_INTERVAL_MS: '250', LEASE_SECONDS: '40' });
    for (const slice of CONFIG_SLICES) {
      const view = module.get<object>(slice);
      expect(Object.keys(view).sort()).toEqual([...slice.keys].sort());
      for (const key of slice.keys) {
        expect(config[key]).not.toBeUndefined();
        expect((view as Record<string, unknown>)[key]).toBe(config[key]);
      }
    }
    expect(module.get(QueueConfig)).toMatchObject({ pollIntervalMs: 250, leaseSeconds: 40 });
    expect(module.get(DatabaseConfig).embeddedDatabase).toBe(true);
    expect('smtpPassword' in module.get(REngineConfig)).toBe(false);
  });

  it('reads the very maps AppConfig holds, so entries replaced at run time are seen', async () => {
    const { config, module } = await moduleFor({
      APPLICATION_SETTINGS: JSON.stringify({ demo: { weight: 2 } }),
      APPLICATION_SLOTS: JSON.stringify({ demo: 1 }),
    });
    const applications = module.get(ApplicationsConfig);
    const engine = module.get(REngineConfig);
    expect(applications.applicationSettings).toBe(config.applicationSettings);
    expect(engine.applicationSlots).toBe(config.applicationSlots);

    // What ApplicationSettingsService does when an application's settings change.
    config.applicationSettings.demo = { weight: 5, networkAllowed: true };
    config.applicationSlots.demo = 3;
    config.applicationSecurity.demo = { userPrincipals: ['ann'] };
    expect(applications.applicationSettings.demo).toEqual({ weight: 5, networkAllowed: true });
    expect(engine.applicationSettings.demo?.networkAllowed).toBe(true);
    expect(engine.applicationSlots.demo).toBe(3);
    expect(applications.applicationSecurity.demo).toEqual({ userPrincipals: ['ann'] });
  });

  it('cannot be written through', async () => {
    const { config, module } = await moduleFor({});
    const queue = module.get(QueueConfig);
    expect(() => {
      (queue as { pollIntervalMs: number }).pollIntervalMs = 1;
    }).toThrow(TypeError);
    expect(config.pollIntervalMs).not.toBe(1);
  });
});
