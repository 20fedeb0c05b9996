import { createServer, IncomingHttpHeaders, Server } from 'node:http';
import { AddressInfo } from 'node:net';

/** One POST the receiver got. */
export interface Delivery {
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** A callback receiver on 127.0.0.1: records every POST and answers the statuses it is told. */
export class Receiver {
  readonly deliveries: Delivery[] = [];
  /** Answered in turn to the next requests; 200 once they are used up. */
  statuses: number[] = [];
  private server: Server | null = null;
  port = 0;

  async start(port = 0): Promise<this> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        this.deliveries.push({ headers: req.headers, body: Buffer.concat(chunks) });
        res.statusCode = this.statuses.shift() ?? 200;
        res.end();
      });
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
    return this;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (server) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  }

  url(path = '/hook'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  deliveriesFor(jobId: string): Delivery[] {
    return this.deliveries.filter((d) => d.headers['x-svc-job-id'] === jobId);
  }
}
