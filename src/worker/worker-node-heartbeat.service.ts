import {
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnApplicationShutdown,
} from '@nestjs/common';
import { SERVICE_VERSION } from '../config/app-config';
import { NodeConfig, QueueConfig } from '../config/config-slices';
import { R_ENGINE, type REngine } from '../r-engine/r-engine';
import { WorkerNodesRepository } from '../queue/worker-nodes.repository';
import { NodeIdentity } from '../storage/node-identity';
import { WorkerService } from './worker.service';

/**
 * Tells the cluster that this worker node lives: its row in `worker_node` (role, R engine, R
 * slots and how many are busy, the service's version, when the process started, its resident
 * memory), written at start and every HEARTBEAT_SECONDS, deleted when the
 * node stops. The console lists the workers from it; a row three heartbeats old is a dead node.
 */
@Injectable()
export class WorkerNodeHeartbeat implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(WorkerNodeHeartbeat.name);
  private timer: NodeJS.Timeout | null = null;
  /** When this process started, as the console shows the node's start. */
  private readonly startedAt = new Date(Date.now() - Math.round(process.uptime() * 1000));

  constructor(
    private readonly nodes: WorkerNodesRepository,
    private readonly worker: WorkerService,
    private readonly node: NodeIdentity,
    private readonly nodeConfig: NodeConfig,
    /** The engine in use (R_ENGINE=auto has chosen by now), not the setting. */
    @Inject(R_ENGINE) private readonly engine: REngine,
    private readonly queue: QueueConfig,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.beat();
    this.timer = setInterval(() => void this.beat(), this.queue.heartbeatSeconds * 1000);
    this.timer.unref();
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.timer) {
      clearInterval(this.timer);
      this.timer = null;
    }
    await this.nodes.remove(this.node.id).catch((error: Error) => {
      this.logger.warn(`could not remove the node's heartbeat: ${error.message}`);
    });
  }

  /** Writes the heartbeat now; a failure is logged, and the next one tries again. */
  async beat(): Promise<void> {
    try {
      await this.nodes.beat({
        nodeId: this.node.id,
        role: this.nodeConfig.role,
        rEngine: this.engine.kind,
        ...this.worker.rSlots,
        version: SERVICE_VERSION,
        startedAt: this.startedAt,
        memoryBytes: process.memoryUsage.rss(),
      });
    } catch (error) {
      this.logger.warn(`the node's heartbeat failed: ${(error as Error).message}`);
    }
  }
}
