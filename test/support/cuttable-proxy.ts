import { createConnection, createServer, Server, Socket } from 'node:net';

/** A TCP proxy to the database that a test can cut and restore, to play a database outage. */
export class CuttableProxy {
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  constructor(
    private readonly target: { host: string; port: number },
    readonly port: number,
  ) {}

  async open(): Promise<void> {
    this.server = createServer((client) => {
      const upstream = createConnection(this.target);
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        socket.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => this.server?.listen(this.port, '127.0.0.1', resolve));
  }

  /**
   * Stops forwarding on the connections open now, without closing them: a network cut that
   * neither side hears of. Connections made afterwards are forwarded as before.
   */
  freeze(): void {
    for (const socket of this.sockets) {
      socket.unpipe();
      socket.pause();
    }
  }

  async cut(): Promise<void> {
    const server = this.server;
    this.server = null;
    for (const socket of this.sockets) {
      socket.destroy();
    }
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }
}

/** An open proxy in front of the database of `databaseUrl`, and the URL that goes through it. */
export async function proxyDatabase(
  databaseUrl: string,
): Promise<{ proxy: CuttableProxy; url: string }> {
  const target = new URL(databaseUrl);
  const probe = createServer();
  const port = await new Promise<number>((resolve) =>
    probe.listen(0, '127.0.0.1', () => resolve((probe.address() as { port: number }).port)),
  );
  await new Promise((resolve) => probe.close(resolve));
  const proxy = new CuttableProxy(
    { host: target.hostname, port: Number(target.port || 5432) },
    port,
  );
  await proxy.open();
  const viaProxy = new URL(target.toString());
  viaProxy.port = String(port);
  viaProxy.hostname = '127.0.0.1';
  return { proxy, url: viaProxy.toString() };
}
