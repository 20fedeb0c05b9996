import { Logger } from '@nestjs/common';
import { statSync } from 'node:fs';
import { chmod, cp, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { REngineConfig } from '../../config/config-slices';
import type { FunctionCallEngine } from '../function-call-engine';
import { ForkSlots } from './fork-slots';
import type { EngineLogger, NativeRuntime } from './native-runtime';
import { EnvironmentStore } from './environment-store';
import { PackageLibrary } from './package-library';
import type { REngine, ScriptRunOutcome, ScriptRunRequest } from '../r-engine';
import { probeSandbox, RLauncher, type SandboxKind } from '../launch/r-launcher';
import {
  chosenRscript,
  effectiveScriptMode,
  findRscript,
  type NativeRConfig,
  type ScriptMode,
} from '../launch/r-location';
import { evaluateR } from '../launch/r-process';
import type { SandboxProblem } from '../launch/r-sandbox';
import { rSourcePath } from '../r-sources';
import type { FunctionLibrarySource } from '../function-library';
import { RSessionPool } from '../sessions/r-session-pool';
import { jobLimits, rLimits, type JobLimits } from './run-limits';
import { SpawnRunner } from './spawn-runner';

const PROBE_TIMEOUT_MS = 30_000;
const HEALTH_TIMEOUT_MS = 10_000;

/**
 * Real R. In `fork` mode (R_SCRIPT_MODE, the default on Linux) warm R parents, the fork servers
 * (one per slot, each in a sandbox of its own: ForkSlots), fork a child per script job; in
 * `spawn` mode each job is a fresh Rscript process (SpawnRunner). Either way every process
 * starts through the RLauncher: a sandbox (R_SANDBOX), a minimal environment, limits, and a
 * kill of everything on timeout.
 */
/** The longest one package's build in an environment may take. */
const ENVIRONMENT_BUILD_TIMEOUT_MS = 10 * 60_000;

export class NativeREngine implements REngine, NativeRuntime {
  readonly kind = 'native' as const;
  readonly rscript: string;
  private cachedVersion: string | undefined;
  private scriptMode: ScriptMode;
  private launcherInstance: RLauncher;
  private runtimeRoot: string | undefined;
  private packageLibrary: PackageLibrary | null = null;
  private environmentStore: EnvironmentStore | null = null;
  private readonly spawned = new SpawnRunner(this);
  private readonly forkSlots: ForkSlots;

  constructor(
    private readonly config: NativeRConfig,
    readonly logger: EngineLogger = new Logger('REngine'),
  ) {
    this.rscript = findRscript(config) ?? chosenRscript(config);
    this.scriptMode = effectiveScriptMode(config);
    this.launcherInstance = this.newLauncher('none');
    this.forkSlots = new ForkSlots(this, config.jobTimeoutSeconds);
  }

  /** Scripts it runs at once: one per worker slot (each fork server serves one job at a time). */
  get maxConcurrentRuns(): number {
    const extra = Object.values(this.config.applicationSlots ?? {}).reduce((a, b) => a + b, 0);
    return Math.max(1, (this.config.scriptSlots ?? 2) + extra);
  }

  /** How script jobs run now: `spawn` also when fork was asked for but the server cannot start. */
  get mode(): ScriptMode {
    return this.scriptMode;
  }

  /** The sandbox in force (known after start()). */
  get sandbox(): SandboxKind {
    return this.launcherInstance.sandbox;
  }

  /**
   * The applications' packages on this node, under the runtime directory: empty at each start,
   * filled again from the database (PackageSyncService).
   */
  get packages(): PackageLibrary | null {
    return this.packageLibrary;
  }

  /** The applications' environments' packages and libraries on this node (R_ENVIRONMENTS_DIR). */
  get environments(): EnvironmentStore | null {
    return this.environmentStore;
  }

  /** The launcher every native R process of this node starts through (sessions too). */
  get launcher(): RLauncher {
    return this.launcherInstance;
  }

  /** The engine's private runtime directory (slots, runs, R programs) while it runs. */
  get root(): string | undefined {
    return this.runtimeRoot;
  }

  private markStarted!: () => void;
  /** Resolves once start() has chosen the sandbox: the launcher is final from then on. */
  readonly started: Promise<void> = new Promise((resolve) => (this.markStarted = resolve));

  /** The engine's private runtime directory (slots, runs, R programs) while it runs, for tests. */
  get runtimeDirectory(): string | undefined {
    return this.runtimeRoot;
  }

  /** Host pid of the first fork server's R process (0 when there is none), for tests. */
  get forkServerPid(): number {
    return this.forkSlots.firstServer?.pid ?? 0;
  }

  limits(timeoutMs: number): JobLimits {
    return jobLimits(this.config, timeoutMs);
  }

  async start(): Promise<void> {
    this.cachedVersion = undefined;
    const sandbox = await this.chooseSandbox();
    if (!this.runtimeRoot) {
      this.runtimeRoot = await mkdtemp(join(tmpdir(), 'svc-r-'));
      await chmod(this.runtimeRoot, 0o711);
      await cp(dirname(rSourcePath('session.R')), join(this.runtimeRoot, 'r'), { recursive: true });
      await chmod(join(this.runtimeRoot, 'r'), 0o755);
      // chmod: the service's umask (PRIVATE_UMASK) would close it to the sandbox user.
      await mkdir(join(this.runtimeRoot, 'packages'));
      await chmod(join(this.runtimeRoot, 'packages'), 0o755);
      this.environmentStore = new EnvironmentStore(
        this.config.rEnvironmentsDir ?? join(this.runtimeRoot, 'environments'),
        () => this.launcher,
        () => rLimits(this.limits(ENVIRONMENT_BUILD_TIMEOUT_MS)),
      );
      await this.environmentStore.open();
      this.packageLibrary = new PackageLibrary(
        join(this.runtimeRoot, 'packages'),
        () => this.launcher,
        [this.environmentStore.root],
      );
    }
    this.launcherInstance = this.newLauncher(sandbox);
    // FIFOs made for the launcher before belong to its sandbox user.
    this.spawned.resume();
    await this.spawned.close();
    this.markStarted();
    if (this.scriptMode === 'fork' && this.config.scriptJobs !== false) {
      try {
        await this.forkSlots.start(this.maxConcurrentRuns);
        return;
      } catch (error) {
        await this.forkSlots.stop();
        this.logger.warn(
          `R_SCRIPT_MODE=fork: the fork server cannot start (${(error as Error).message}); running each script job in a fresh R process instead`,
        );
        this.scriptMode = 'spawn';
      }
    }
    await this.version().catch((error: unknown) => {
      const reason = error instanceof Error ? error.message : String(error);
      throw new Error(
        `R cannot run: ${this.rscript} failed (${reason}); set RSCRIPT_PATH to an Rscript executable or R_HOME to an R installation, or set R_ENGINE=webr`,
      );
    });
  }

  async version(): Promise<string> {
    const server = this.forkSlots.firstServer;
    if (server?.version) {
      return server.version;
    }
    this.cachedVersion ??= (await this.evaluate('cat(R.version.string)', PROBE_TIMEOUT_MS)).trim();
    return this.cachedVersion;
  }

  async healthy(): Promise<boolean> {
    // A slot whose server keeps failing to start cannot run jobs: the node is not healthy.
    if (!this.forkSlots.usable) {
      return false;
    }
    try {
      const server = this.forkSlots.firstServer;
      if (server) {
        return (await server.ping()).trim() === '2';
      }
      return (await this.evaluate('cat(1+1)', HEALTH_TIMEOUT_MS)).trim() === '2';
    } catch {
      return false;
    }
  }

  async runScript(request: ScriptRunRequest): Promise<ScriptRunOutcome> {
    if (!statSync(request.workDir).isDirectory()) {
      throw new Error(`job ${request.jobId}: ${request.workDir} is not a directory`);
    }
    // Jobs of applications allowed the network run in a fresh, networked sandbox: the fork
    // servers' sandboxes have no network.
    if (this.forkSlots.active && !request.network) {
      return this.forkSlots.run(request);
    }
    return this.spawned.run(request);
  }

  functionCalls(config: REngineConfig, libraries: FunctionLibrarySource): FunctionCallEngine {
    return new RSessionPool(
      {
        ...config,
        rscript: this.rscript,
        launcher: () => this.launcher,
        launcherReady: this.started,
        packages: () => this.packages,
      },
      libraries,
    );
  }

  async stop(): Promise<void> {
    // Nothing may add to the runtime directory while it is removed (ENOTEMPTY otherwise).
    await this.spawned.stop();
    await this.forkSlots.stop();
    if (this.runtimeRoot) {
      await rm(this.runtimeRoot, { recursive: true, force: true });
      this.runtimeRoot = undefined;
      this.packageLibrary = null;
      this.environmentStore = null;
    }
  }

  /** R_SANDBOX resolved: bwrap when asked or (auto) when it works; start-up fails as configured. */
  private async chooseSandbox(): Promise<SandboxKind> {
    const setting = this.config.rSandbox ?? 'auto';
    if (setting === 'none') {
      return 'none';
    }
    const dir = await mkdtemp(join(tmpdir(), 'svc-probe-'));
    let problem: SandboxProblem | null;
    try {
      problem = probeSandbox({ rscript: this.rscript, rHome: this.config.rHome }, dir);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    if (problem === null) {
      return 'bwrap';
    }
    const { cause, fix } = problem;
    if (setting === 'bwrap') {
      throw new Error(`R_SANDBOX=bwrap: ${cause}; ${fix}, or set R_SANDBOX=none`);
    }
    const authMode = this.config.authMode ?? 'none';
    if (authMode !== 'none') {
      throw new Error(
        `R_SANDBOX=auto: no sandbox for R (${cause}) while AUTH_MODE=${authMode}: ${fix}, or set R_SANDBOX=none to accept that R code runs with the service's rights`,
      );
    }
    this.logger.warn(
      `no sandbox for R (${cause}): R code runs with the service's rights and can read its files, secrets and network; ${fix}`,
    );
    return 'none';
  }

  private newLauncher(sandbox: SandboxKind): RLauncher {
    return new RLauncher({
      rscript: this.rscript,
      rHome: this.config.rHome,
      sandbox,
      sourcesDir: this.runtimeRoot ? join(this.runtimeRoot, 'r') : null,
      runtimeDir: this.runtimeRoot ?? undefined,
      warn: (message) => this.logger.warn(message),
    });
  }

  /** Evaluates a line of R in a short-lived (sandboxed) process and returns what it printed. */
  private evaluate(code: string, timeoutMs: number): Promise<string> {
    return evaluateR(this.launcherInstance, this.runtimeRoot ?? tmpdir(), code, timeoutMs);
  }
}
