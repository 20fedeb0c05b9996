/**
 * A loopback TCP proxy in front of PostgreSQL that counts the frontend messages of the
 * connections through it: each simple Query ('Q') and each Sync ('S', the end of an extended-
 * protocol query) waits for the server's ReadyForQuery, so their sum is the number of round trips.
 * It also tallies the SQL text of each statement, to show which statements a request sends.
 */
import { createConnection, createServer, Server, Socket } from 'node:net';

const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;

export interface MessageCounts {
  roundTrips: number;
  simpleQueries: number;
  extendedQueries: number;
  /** SQL text (whitespace collapsed, cut at 600 characters) -> times sent. */
  statements: Record<string, number>;
}

function emptyCounts(): MessageCounts {
  return { roundTrips: 0, simpleQueries: 0, extendedQueries: 0, statements: {} };
}

/** Parses one direction of the protocol (frontend to backend) as bytes arrive. */
class FrontendParser {
  private buffer: Buffer = Buffer.alloc(0);
  private startup = true;

  constructor(private readonly counts: () => MessageCounts) {}

  push(chunk: Buffer): void {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    for (;;) {
      if (this.startup) {
        if (this.buffer.length < 8) {
          return;
        }
        const length = this.buffer.readInt32BE(0);
        if (this.buffer.length < length) {
          return;
        }
        const code = this.buffer.readInt32BE(4);
        this.startup = code === SSL_REQUEST || code === GSSENC_REQUEST;
        this.buffer = this.buffer.subarray(length);
        continue;
      }
      if (this.buffer.length < 5) {
        return;
      }
      const length = this.buffer.readInt32BE(1);
      if (this.buffer.length < 1 + length) {
        return;
      }
      this.message(String.fromCharCode(this.buffer[0]), this.buffer.subarray(5, 1 + length));
      this.buffer = this.buffer.subarray(1 + length);
    }
  }

  private message(type: string, body: Buffer): void {
    const counts = this.counts();
    if (type === 'Q') {
      counts.roundTrips += 1;
      counts.simpleQueries += 1;
      this.tally(counts, body.subarray(0, body.indexOf(0)).toString('utf8'));
    } else if (type === 'S') {
      counts.roundTrips += 1;
      counts.extendedQueries += 1;
    } else if (type === 'P') {
      // Parse: statement name, NUL, query text, NUL, ...
      const nameEnd = body.indexOf(0);
      this.tally(counts, body.subarray(nameEnd + 1, body.indexOf(0, nameEnd + 1)).toString('utf8'));
    }
  }

  private tally(counts: MessageCounts, sql: string): void {
    const key = sql.replace(/\s+/g, ' ').trim().slice(0, 600);
    counts.statements[key] = (counts.statements[key] ?? 0) + 1;
  }
}

export class PgMessageCounter {
  private counts = emptyCounts();
  private readonly sockets = new Set<Socket>();
  private readonly server: Server;
  private listeningPort = 0;

  private constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {
    this.server = createServer((client) => this.relay(client));
  }

  static async start(targetHost: string, targetPort: number): Promise<PgMessageCounter> {
    const counter = new PgMessageCounter(targetHost, targetPort);
    counter.listeningPort = await new Promise<number>((resolvePort, reject) => {
      counter.server.once('error', reject);
      counter.server.listen(0, '127.0.0.1', () =>
        resolvePort((counter.server.address() as { port: number }).port),
      );
    });
    return counter;
  }

  /** The loopback port to point the service's DATABASE_URL at. */
  get port(): number {
    return this.listeningPort;
  }

  private relay(client: Socket): void {
    const upstream = createConnection({ host: this.targetHost, port: this.targetPort });
    const parser = new FrontendParser(() => this.counts);
    this.sockets.add(client).add(upstream);
    client.on('data', (chunk: Buffer) => {
      parser.push(chunk);
      upstream.write(chunk);
    });
    upstream.pipe(client);
    const close = (): void => {
      client.destroy();
      upstream.destroy();
      this.sockets.delete(client);
      this.sockets.delete(upstream);
    };
    client.on('close', close).on('error', close);
    upstream.on('close', close).on('error', close);
  }

  /** The counts since the last call (or the start), and a fresh count from now on. */
  take(): MessageCounts {
    const counts = this.counts;
    this.counts = emptyCounts();
    return counts;
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) {
      socket.destroy();
    }
    await new Promise<void>((resolveClose) => this.server.close(() => resolveClose()));
  }
}
