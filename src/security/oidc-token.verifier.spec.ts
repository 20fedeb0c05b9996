import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fetchJson } from './oidc-token.verifier';

/** An issuer's document server: whatever the test's handler writes, on 127.0.0.1. */
async function documentServer(
  handler: Parameters<typeof createServer>[1],
): Promise<{ server: Server; url: URL }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { server, url: new URL(`http://127.0.0.1:${port}/jwks`) };
}

describe('fetchJson (an issuer answers hostile documents)', () => {
  let server: Server | null = null;
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    server = null;
  });

  it('stops reading an answer without a length once it passes 1 MiB, and says so', async () => {
    let written = 0;
    let answerClosed: (finished: boolean) => void = () => undefined;
    const closed = new Promise<boolean>((resolve) => (answerClosed = resolve));
    const started = await documentServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      const piece = Buffer.alloc(64 * 1024, 0x20);
      const writeMore = (): void => {
        // An issuer that never ends its answer: 256 MiB at most, so a failed test still ends.
        while (written < 256 * 1024 * 1024) {
          written += piece.length;
          if (!response.write(piece)) {
            response.once('drain', writeMore);
            return;
          }
        }
        response.end();
      };
      response.on('close', () => answerClosed(response.writableFinished));
      writeMore();
    });
    server = started.server;
    await expect(fetchJson(started.url)).rejects.toThrow('answered more than 1048576 bytes');
    // The client hung up: the issuer's answer closed before it was finished.
    await expect(closed).resolves.toBe(false);
    expect(written).toBeLessThan(64 * 1024 * 1024);
  });

  it('refuses an answer whose declared length is over the bound without reading it', async () => {
    const started = await documentServer((_request, response) => {
      response.writeHead(200, { 'content-length': String(2 * 1024 * 1024) });
      response.write('{');
    });
    server = started.server;
    await expect(fetchJson(started.url)).rejects.toThrow('answered more than 1048576 bytes');
  });

  it('reads a document within the bound', async () => {
    const started = await documentServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ keys: [] }));
    });
    server = started.server;
    await expect(fetchJson(started.url)).resolves.toEqual({ keys: [] });
  });
});
