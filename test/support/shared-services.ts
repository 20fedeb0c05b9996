import {
  startTestService,
  TestService,
  throwIfLeaked,
  waitForNoChildProcesses,
} from './test-service';

/** Settings the service ignores with webR: they pick how native R runs a script. */
const NATIVE_R_ONLY = ['R_SCRIPT_MODE'];

/** The configuration a service really runs with: what the pass's R engine ignores left out. */
function configurationKey(overrides: Record<string, string>): string {
  const engine = overrides.R_ENGINE ?? process.env.R_ENGINE;
  const effective = Object.entries(overrides).filter(
    ([name]) => engine !== 'webr' || !NATIVE_R_ONLY.includes(name),
  );
  return JSON.stringify(effective.sort(([a], [b]) => a.localeCompare(b)));
}

export interface SharedServices {
  /**
   * The file's service of this configuration, started at the first call; a later call with the
   * same configuration (once the settings the pass's R engine ignores are left out) gets the
   * same one. Call it in `beforeAll`.
   */
  start(overrides?: Record<string, string>): Promise<TestService>;
}

/**
 * Services shared by the describes of one spec file: one per configuration, stopped after the
 * file's last test. A service start costs seconds (R's warm sessions, PGlite and webR), so
 * describes that ask for the same configuration, for example `describe.each` over
 * R_SCRIPT_MODE on the webR pass, pay for it once. Call at the top level of the file: it
 * registers the `afterAll` that stops them. A service that runs while a shared one does is
 * started here too: a service stopped alone would find the others' R processes and call them its
 * leak; these are checked once, after the last is stopped.
 */
export function sharedServices(): SharedServices {
  const started = new Map<string, Promise<TestService>>();
  afterAll(async () => {
    const outcomes = await Promise.allSettled(started.values());
    started.clear();
    const failures: unknown[] = [];
    // The last started first: each gives back the umask the one before it found.
    for (const outcome of outcomes.reverse()) {
      if (outcome.status === 'fulfilled') {
        await outcome.value.stopLeavingLeakCheck().catch((error: unknown) => failures.push(error));
      }
    }
    if (failures.length > 0) {
      throw failures[0];
    }
    throwIfLeaked(await waitForNoChildProcesses());
  });
  return {
    start(overrides = {}) {
      const key = configurationKey(overrides);
      let service = started.get(key);
      if (!service) {
        service = startTestService(overrides);
        started.set(key, service);
      }
      return service;
    },
  };
}
