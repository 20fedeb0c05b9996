import { createServer, Server } from 'node:http';
import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { AdminConfig, NodeConfig } from '../config/config-slices';
import { METRICS_CHALLENGE, metricsRefusal } from './metrics-access';
import { MetricsService } from './metrics.service';

const TEXT = { 'Content-Type': 'text/plain', 'X-Content-Type-Options': 'nosniff' };

/**
 * A node of role worker has no API server, yet it is where jobs finish. With WORKER_METRICS_PORT
 * set it answers `GET /metrics` (and nothing else) on that port and HOST, so Prometheus can scrape
 * it, under the same METRICS_ACCESS rule as the API's.
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
        res.writeHead(path === '/metrics' ? 405 : 404, TEXT);
        res.end(path === '/metrics' ? 'GET only\n' : 'only /metrics here\n');
        return;
      }
      const refusal = metricsRefusal(this.config, req.headers.authorization);
      if (refusal !== null) {
        res.writeHead(401, { ...TEXT, 'WWW-Authenticate': METRICS_CHALLENGE });
        res.end(`${refusal}\n`);
        return;
      }
      this.metrics.render().then(
        (body) => {
          res.writeHead(200, {
            'Content-Type': this.metrics.contentType,
            'X-Content-Type-Options': 'nosniff',
          });
          res.end(req.method === 'HEAD' ? undefined : body);
        },
        (error: Error) => {
          res.writeHead(500, TEXT);
          res.end(`${error.message}\n`);
        },
      );
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.config.workerMetricsPort, this.node.host, () => resolve());
    });
    this.server = server;
    this.logger.log(`metrics at http://${this.node.host}:${this.port}/metrics`);
  }

  async onApplicationShutdown(): Promise<void> {
    const server = this.server;
    this.server = null;
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }
}
