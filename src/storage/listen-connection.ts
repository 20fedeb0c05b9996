import { Logger } from '@nestjs/common';
import { Client } from 'pg';

const RECONNECT_MS = 2000;

export interface ListenHandlers {
  onNotification(channel: string, payload: string): void;
  /** The connection listens (again): notifications sent while it was down are lost. */
  onListening?(): void;
  /** The connection was lost, or could not be made. */
  onLost?(): void;
}

/**
 * One dedicated session that LISTENs on `channels` and reconnects by itself every 2 s while it
 * is down. LISTEN belongs to a session, so this is a direct connection to PostgreSQL (never a
 * transaction-mode pooler): DATABASE_LISTEN_URL, else DATABASE_URL when no pooler is in between.
 */
export class ListenConnection {
  private client: Client | null = null;
  private active = false;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private connecting: Promise<void> = Promise.resolve();

  constructor(
    private readonly options: {
      url: string;
      applicationName: string;
      channels: readonly string[];
      /** What listens, for the log lines ("LISTEN for catalog changes"). */
      purpose: string;
    },
    private readonly handlers: ListenHandlers,
    private readonly logger: Logger,
  ) {}

  /** True while the session listens. */
  get listening(): boolean {
    return this.client !== null;
  }

  /** Starts listening; resolves after the first connection attempt. */
  start(): Promise<void> {
    if (!this.active) {
      this.active = true;
      this.connecting = this.connect();
    }
    return this.connecting;
  }

  async stop(): Promise<void> {
    this.active = false;
    if (this.reconnectTimer) {
      clearTimeout(this.reconnectTimer);
      this.reconnectTimer = null;
    }
    await this.connecting;
    const client = this.client;
    this.client = null;
    if (client) {
      await closeQuietly(client);
    }
  }

  private async connect(): Promise<void> {
    if (!this.active) {
      return;
    }
    const client = new Client({
      connectionString: this.options.url,
      application_name: this.options.applicationName,
      connectionTimeoutMillis: 3000,
    });
    client.on('notification', (message) =>
      this.handlers.onNotification(message.channel, message.payload ?? ''),
    );
    client.on('error', (error) => {
      this.logger.warn(
        `${this.options.purpose}: connection lost (${error.message}); polling until it is back`,
      );
      this.reconnect(client);
    });
    client.on('end', () => this.reconnect(client));
    try {
      await client.connect();
      await client.query(this.options.channels.map((channel) => `LISTEN ${channel}`).join('; '));
      if (!this.active) {
        // Stopped while connecting.
        await closeQuietly(client);
        return;
      }
      this.client = client;
      this.handlers.onListening?.();
    } catch (error) {
      this.logger.warn(
        `${this.options.purpose}: could not LISTEN (${(error as Error).message}); retrying, polling meanwhile`,
      );
      this.reconnect(client);
    }
  }

  private reconnect(client: Client): void {
    if (this.client === client) {
      this.client = null;
    }
    void closeQuietly(client);
    this.handlers.onLost?.();
    if (!this.active || this.reconnectTimer) {
      return;
    }
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      this.connecting = this.connect();
    }, RECONNECT_MS);
  }
}

async function closeQuietly(client: Client): Promise<void> {
  client.removeAllListeners();
  client.on('error', () => undefined);
  await client.end().catch(() => undefined);
}
