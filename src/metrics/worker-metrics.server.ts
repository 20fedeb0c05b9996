import { createServer, Server } from 'node:http';
import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { AdminConfig, NodeConfig } from '../config/config-slices';
import { MetricsService } from './metrics.service';

/**
 * A node of role worker has no API server, yet it is where jobs finish. With WORKER_METRICS_PORT
 * set it answers `GET /metrics` (and nothing else) on that port, so Prometheus can scrape it.
 */
@Injectable()
export class WorkerMetricsServer implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(WorkerMetricsServer.name);
  private server: Server | null = null;

  constructor(
    private readonly node: NodeConfig,
    private readonly config: AdminConfig,
    private readonly metrics: MetricsService,
  ) {}

  /** The port it listens on (null when not serving). */
  get port(): number | null {
    const address = this.server?.address();
    return typeof address === 'object' && address ? address.port : null;
  }

  async onApplicationBootstrap(): Promise<void> {
    if (this.node.role !== 'worker' || this.config.workerMetricsPort === 0) {
      return;
    }
    const server = createServer((req, res) => {
      const path = (req.url ?? '').split('?')[0];
      if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
        res.writeHead(path === '/metrics' ? 405 : 404, { 'Content-Type': 'text/plain' });
        res.end(path === '/metrics' ? 'GET only\n' : 'only /metrics here\n');
        return;
      }
      this.metrics.render().then(
        (body) => {
          res.writeHead(200, { 'Content-Type': this.metrics.contentType });
          res.end(req.method === 'HEAD' ? undefined : body);
        },
        (error: Error) => {
          res.writeHead(500, { 'Content-Type': 'text/plain' });
          res.end(`${error.message}\n`);
        },
      );
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.config.workerMetricsPort, '0.0.0.0', () => resolve());
    });
    this.server = server;
    this.logger.log(`metrics at http://0.0.0.0:${this.port}/metrics`);
  }

  async onApplicationShutdown(): Promise<void> {
    const server = this.server;
    this.server = null;
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }
}
