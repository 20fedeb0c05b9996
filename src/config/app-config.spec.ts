import { ConfigError, corsOriginsOf, envNameOf, loadConfig, trustProxyOf } from './app-config';
import { applicationSettingsOf, claimPoliciesOf } from './application-settings';

function problemsOf(env: NodeJS.ProcessEnv): string[] {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) {
      return error.problems;
    }
    throw error;
  }
  return [];
}

describe('configuration', () => {
  it('has working defaults: port 8888, embedded database, role all, R engine auto', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 8888,
      databaseUrl: null,
      role: 'all',
      rEngine: 'auto',
      logLevel: 'info',
    });
    expect(config.embeddedDatabase).toBe(true);
  });

  it('listens on the loopback, follows no proxy and shows /metrics to a token only, by default', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({ host: '127.0.0.1', metricsAccess: 'token', metricsToken: null });
    expect(trustProxyOf(config)).toBe(false);
  });

  it('reads TRUST_PROXY as Express does, and names a rule it cannot use', () => {
    expect(trustProxyOf(loadConfig({ TRUST_PROXY: 'true' }))).toBe(true);
    expect(trustProxyOf(loadConfig({ TRUST_PROXY: '2' }))).toBe(2);
    expect(trustProxyOf(loadConfig({ TRUST_PROXY: 'loopback, 10.0.0.0/8,::1' }))).toEqual([
      'loopback',
      '10.0.0.0/8',
      '::1',
    ]);
    expect(() => loadConfig({ TRUST_PROXY: 'loopback,proxy.example.com' })).toThrow(
      /TRUST_PROXY=loopback,proxy.example.com: proxy.example.com is not an address/,
    );
    expect(() => loadConfig({ METRICS_TOKEN: 'short' })).toThrow(/METRICS_TOKEN/);
    expect(() => loadConfig({ METRICS_ACCESS: 'anyone' })).toThrow(/METRICS_ACCESS/);
  });

  it('reads the fixed environment names of SPEC §11', () => {
    const config = loadConfig({
      PORT: '9000',
      DATABASE_URL: 'postgres://u@db:5432/svc',
      DATA_DIR: '/tmp/svc-data',
      PUBLIC_BASE_URL: 'https://svc.example.org',
      R_ENGINE: 'webr',
      RSCRIPT_PATH: '/opt/R/bin/Rscript',
      R_HOME: '/opt/R',
      ROLE: 'worker',
      LOG_LEVEL: 'debug',
      SCRIPT_SLOTS: '4',
      APPLICATION_SLOTS: '{"vip":2}',
      MIGRATIONS_RUN: 'true',
    });
    expect(config).toMatchObject({
      port: 9000,
      databaseUrl: 'postgres://u@db:5432/svc',
      dataDir: '/tmp/svc-data',
      publicBaseUrl: 'https://svc.example.org',
      rEngine: 'webr',
      rscriptPath: '/opt/R/bin/Rscript',
      rHome: '/opt/R',
      role: 'worker',
      logLevel: 'debug',
      scriptSlots: 4,
      applicationSlots: { vip: 2 },
      migrationsRun: true,
    });
    expect(config.embeddedDatabase).toBe(false);
  });

  it('names every bad setting on its own line', () => {
    const problems = problemsOf({
      PORT: 'eighty',
      ROLE: 'boss',
      R_ENGINE: 'python',
      DATABASE_URL: 'mysql://x',
      PUBLIC_BASE_URL: 'not a url',
      APPLICATION_SLOTS: '{"bad-name":1}',
      MIGRATIONS_RUN: 'maybe',
    });
    expect(problems).toHaveLength(7);
    for (const name of [
      'PORT',
      'ROLE',
      'R_ENGINE',
      'DATABASE_URL',
      'PUBLIC_BASE_URL',
      'APPLICATION_SLOTS',
      'MIGRATIONS_RUN',
    ]) {
      expect(problems.some((line) => line.startsWith(name))).toBe(true);
    }
  });

  it('needs a long AUDIT_PSEUDONYM_KEY with AUDIT_PSEUDONYMIZE, and never echoes it', () => {
    expect(problemsOf({ AUDIT_PSEUDONYMIZE: 'true' })).toEqual([
      expect.stringMatching(
        /^AUDIT_PSEUDONYM_KEY: AUDIT_PSEUDONYMIZE=true needs a key of at least 32/,
      ),
    ]);
    const short = problemsOf({ AUDIT_PSEUDONYMIZE: 'true', AUDIT_PSEUDONYM_KEY: 'short-key' });
    expect(short).toHaveLength(1);
    expect(short[0]).not.toContain('short-key');
    expect(
      loadConfig({ AUDIT_PSEUDONYMIZE: 'true', AUDIT_PSEUDONYM_KEY: 'k'.repeat(32) }),
    ).toMatchObject({ auditPseudonymize: true, auditRetentionDays: 400 });
    expect(problemsOf({ AUDIT_RETENTION_DAYS: '-1' })).toEqual([
      expect.stringMatching(/^AUDIT_RETENTION_DAYS/),
    ]);
  });

  it('reads the pooler and the direct LISTEN URL, and refuses them without DATABASE_URL', () => {
    expect(loadConfig({ DATABASE_URL: 'postgres://u@db/svc' })).toMatchObject({
      databaseListenUrl: null,
      databasePooler: 'none',
    });
    expect(
      loadConfig({
        DATABASE_URL: 'postgres://u@pgbouncer:6432/svc',
        DATABASE_POOLER: 'pgbouncer',
        DATABASE_LISTEN_URL: 'postgresql://u@db:5432/svc',
      }),
    ).toMatchObject({
      databasePooler: 'pgbouncer',
      databaseListenUrl: 'postgresql://u@db:5432/svc',
    });
    expect(problemsOf({ DATABASE_URL: 'postgres://u@db/svc', DATABASE_POOLER: 'odyssey' })).toEqual(
      [expect.stringMatching(/^DATABASE_POOLER="odyssey": must be one of/)],
    );
    expect(
      problemsOf({ DATABASE_URL: 'postgres://u@db/svc', DATABASE_LISTEN_URL: 'http://db' }),
    ).toEqual(['DATABASE_LISTEN_URL=(value hidden): must be a postgres:// URL']);
    expect(problemsOf({ DATABASE_LISTEN_URL: 'postgres://u@db/svc' })).toEqual([
      expect.stringMatching(/^DATABASE_LISTEN_URL: needs DATABASE_URL/),
    ]);
    expect(problemsOf({ DATABASE_POOLER: 'pgbouncer' })).toEqual([
      expect.stringMatching(/^DATABASE_POOLER: needs DATABASE_URL/),
    ]);
  });

  it('rejects a heartbeat that is not shorter than the lease', () => {
    expect(problemsOf({ LEASE_SECONDS: '5', HEARTBEAT_SECONDS: '5' })).toEqual([
      'HEARTBEAT_SECONDS=5: must be less than LEASE_SECONDS (5)',
    ]);
  });

  it('reads per-application settings with their defaults, and names each bad one', () => {
    const config = loadConfig({
      APPLICATION_SETTINGS: '{"reports":{"networkAllowed":true,"resultRetentionHours":24}}',
      RESULT_RETENTION_HOURS: '48',
    });
    expect(applicationSettingsOf(config, 'reports')).toMatchObject({
      networkAllowed: true,
      resultRetentionHours: 24,
    });
    expect(applicationSettingsOf(config, 'other')).toMatchObject({
      networkAllowed: false,
      resultRetentionHours: 48,
      callbackHosts: [],
    });
    expect(
      problemsOf({
        APPLICATION_SETTINGS:
          '{"a":{"networkAllowed":"yes","colour":1,"callbackSecret":"short"},"bad-name":{}}',
      }),
    ).toEqual([
      'APPLICATION_SETTINGS: "a": unknown setting "colour" (known: networkAllowed, resultRetentionHours, callbackHosts, callbackSecret, dropDirectory, weight, maxRunningJobs, maxQueuedJobs, maxSubmissionsPerMinute, maxSubmissionsPerMinutePerPrincipal, maxJobSizeBytes, defaultPriority, minPriority, maxPriority)',
      'APPLICATION_SETTINGS: "a": networkAllowed must be true or false',
      'APPLICATION_SETTINGS: "a": callbackSecret must be a string of at least 16 characters',
      'APPLICATION_SETTINGS: "bad-name": not an application name (letters, digits, _; at most 64)',
    ]);
  });

  it('reads the fair-share, limit and priority settings, and names each bad one', () => {
    const config = loadConfig({
      APPLICATION_SETTINGS:
        '{"a":{"weight":2.5,"maxRunningJobs":3,"maxQueuedJobs":100,"defaultPriority":2,"maxPriority":5},"b":{"maxSubmissionsPerMinute":10}}',
    });
    expect(applicationSettingsOf(config, 'a')).toMatchObject({
      weight: 2.5,
      maxRunningJobs: 3,
      maxQueuedJobs: 100,
      maxSubmissionsPerMinute: null,
      defaultPriority: 2,
      minPriority: 0,
      maxPriority: 5,
    });
    expect(applicationSettingsOf(config, 'other')).toMatchObject({
      weight: 1,
      maxRunningJobs: null,
      defaultPriority: 0,
      minPriority: 0,
      maxPriority: 0,
    });
    // The claim is told only of applications that differ from weight 1 and no cap.
    expect(claimPoliciesOf(config)).toEqual({
      applications: ['a'],
      weights: [2.5],
      maxRunning: [3],
    });
    expect(
      problemsOf({
        APPLICATION_SETTINGS:
          '{"a":{"weight":0,"maxRunningJobs":1.5,"maxQueuedJobs":0,"maxJobSizeBytes":"big"},"b":{"defaultPriority":7,"maxPriority":5},"c":{"minPriority":-5000}}',
      }),
    ).toEqual([
      'APPLICATION_SETTINGS: "a": weight must be a number above 0 and at most 1000',
      'APPLICATION_SETTINGS: "a": maxRunningJobs must be a whole number >= 1',
      'APPLICATION_SETTINGS: "a": maxQueuedJobs must be a whole number >= 1',
      'APPLICATION_SETTINGS: "a": maxJobSizeBytes must be a whole number >= 1',
      'APPLICATION_SETTINGS: "b": defaultPriority (7) must lie within minPriority (0) and maxPriority (5)',
      'APPLICATION_SETTINGS: "c": minPriority must be a whole number from -1000 to 1000',
    ]);
  });

  it('takes a drop directory as an absolute path of one application only', () => {
    const config = loadConfig({
      APPLICATION_SETTINGS: '{"reports":{"dropDirectory":"/srv/drop"}}',
    });
    expect(applicationSettingsOf(config, 'reports').dropDirectory).toBe('/srv/drop');
    expect(applicationSettingsOf(config, 'other').dropDirectory).toBeNull();
    expect(
      problemsOf({
        APPLICATION_SETTINGS:
          '{"a":{"dropDirectory":"drop"},"b":{"dropDirectory":"/srv/x"},"c":{"dropDirectory":"/srv/x/"}}',
      }),
    ).toEqual([
      'APPLICATION_SETTINGS: "a": dropDirectory must be an absolute path, e.g. "/srv/svc/drop/a"',
      'APPLICATION_SETTINGS: "c": dropDirectory /srv/x/ is already the drop directory of "b"',
    ]);
  });

  it('reads CORS_ORIGINS as a list of origins and refuses anything else', () => {
    expect(corsOriginsOf(loadConfig({}))).toEqual([]);
    expect(
      corsOriginsOf(loadConfig({ CORS_ORIGINS: 'https://a.example.com, http://localhost:3000' })),
    ).toEqual(['https://a.example.com', 'http://localhost:3000']);
    for (const bad of ['*', 'a.example.com', 'https://a.example.com/path', 'ftp://x']) {
      expect(problemsOf({ CORS_ORIGINS: bad })).toEqual([
        `CORS_ORIGINS=${JSON.stringify(bad)}: must be a comma-separated list of origins such as https://app.example.com`,
      ]);
    }
  });

  it('derives environment names from keys', () => {
    expect(envNameOf('jobTimeoutSeconds')).toBe('JOB_TIMEOUT_SECONDS');
    expect(envNameOf('port')).toBe('PORT');
  });
});
