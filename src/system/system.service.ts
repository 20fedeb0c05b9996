import { freemem, hostname, loadavg, totalmem } from 'node:os';
import { BeforeApplicationShutdown, Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { SERVICE_VERSION } from '../config/app-config';
import { AdminConfig, REngineConfig } from '../config/config-slices';
import { NodeInformationView } from './system-view';
import { findRscript } from '../r-engine/launch/r-location';
import { R_ENGINE, REngine, REngineKind } from '../r-engine/r-engine';

export interface HealthReport {
  healthy: boolean;
  database: 'up' | 'down';
  /** `skipped`: this node runs no R (role api). */
  rEngine: 'up' | 'down' | 'skipped';
}

/** Resolves within `ms` to the promise's value, or to `fallback` (errors too). */
async function within<T>(promise: Promise<T>, ms: number, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(fallback), ms);
  });
  try {
    return await Promise.race([promise.catch(() => fallback), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export function formatUptime(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  const parts = [
    [Math.floor(seconds / 86400), 'd'],
    [Math.floor(seconds / 3600) % 24, 'h'],
    [Math.floor(seconds / 60) % 60, 'min'],
    [seconds % 60, 's'],
  ] as const;
  const first = parts.findIndex(([value]) => value > 0);
  return parts
    .slice(first < 0 ? parts.length - 1 : first)
    .map(([value, unit]) => `${value} ${unit}`)
    .join(' ');
}

/**
 * Health and node information (SPEC §9). Every role loads the R engine today (api nodes for
 * /process); should a node run without one, its checks cover the database only and its
 * information names the engine the configuration selects, with no version.
 */
@Injectable()
export class SystemService implements BeforeApplicationShutdown {
  private readonly startedAt = Date.now();
  private shuttingDown = false;
  private readonly engine: REngine | null;

  constructor(
    private readonly admin: AdminConfig,
    private readonly config: REngineConfig,
    @InjectDataSource() private readonly dataSource: DataSource,
    moduleRef: ModuleRef,
  ) {
    this.engine = SystemService.findEngine(moduleRef);
  }

  private static findEngine(moduleRef: ModuleRef): REngine | null {
    try {
      return moduleRef.get<REngine>(R_ENGINE, { strict: false });
    } catch {
      return null; // a node without the R engine module
    }
  }

  /** Runs before the HTTP server closes: readiness turns 503 while requests still drain. */
  beforeApplicationShutdown(): void {
    this.shuttingDown = true;
  }

  async databaseAnswers(): Promise<boolean> {
    return within(
      this.dataSource.query('SELECT 1').then(() => true),
      this.admin.healthCheckTimeoutMs,
      false,
    );
  }

  /** The deep check: the database answers and R evaluates `1+1` (where this node runs R). */
  async check(): Promise<HealthReport> {
    const [database, r] = await Promise.all([
      this.databaseAnswers(),
      this.engine
        ? within(this.engine.healthy(), this.admin.healthCheckTimeoutMs, false)
        : Promise.resolve(null),
    ]);
    const rEngine = r === null ? 'skipped' : r ? 'up' : 'down';
    return {
      healthy: database && rEngine !== 'down',
      database: database ? 'up' : 'down',
      rEngine,
    };
  }

  /** Ready for traffic: not shutting down, and the database answers. */
  async ready(): Promise<{ ready: boolean; reason?: string }> {
    if (this.shuttingDown) {
      return { ready: false, reason: 'shutting down' };
    }
    return (await this.databaseAnswers())
      ? { ready: true }
      : { ready: false, reason: 'the database does not answer' };
  }

  async information(): Promise<NodeInformationView> {
    const [health, rVersion] = await Promise.all([
      this.check(),
      this.engine
        ? within(this.engine.version(), this.admin.healthCheckTimeoutMs, 'unknown')
        : Promise.resolve(`none: a node of role ${this.config.role} runs no R`),
    ]);
    const uptime = Date.now() - this.startedAt;
    return {
      name: `${hostname()}:${process.pid}`,
      healthy: health.healthy,
      uptime,
      uptimeText: formatUptime(uptime),
      serverInfo: `svc/${SERVICE_VERSION} (Node.js ${process.version}; ${process.platform} ${process.arch}; role ${this.config.role})`,
      version: SERVICE_VERSION,
      rEngine: this.engine?.kind ?? this.configuredEngine(),
      rVersion,
      rSandbox: this.engine?.sandbox ?? 'none',
      maxMemory: totalmem(),
      freeMemory: freemem(),
      osLoadAverage: loadavg()[0],
    };
  }

  /** The engine R_ENGINE selects on this host, for a node that loads none. */
  private configuredEngine(): REngineKind {
    if (this.config.rEngine !== 'auto') {
      return this.config.rEngine;
    }
    return this.config.rscriptPath || this.config.rHome || findRscript(this.config)
      ? 'native'
      : 'webr';
  }
}
