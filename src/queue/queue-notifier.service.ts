import { EventEmitter } from 'node:events';
import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { Client } from 'pg';
import { DatabaseTarget } from '../storage/database-options';
import { DATABASE_TARGET } from '../storage/storage.module';
import { JOB_QUEUED_CHANNEL } from './queue.repository';

/**
 * Wakes workers early when a job is queued: at once in this process, and through
 * LISTEN/NOTIFY from other nodes. Only an optimisation: workers also poll, so a lost
 * notification delays a job by one poll interval at most.
 */
@Injectable()
export class QueueNotifier implements OnApplicationShutdown {
  private readonly logger = new Logger(QueueNotifier.name);
  private readonly events = new EventEmitter();
  private listener: Client | null = null;
  private listening = false;
  private reconnectTimer: NodeJS.Timeout | null = null;

  constructor(@Inject(DATABASE_TARGET) private readonly target: DatabaseTarget) {}

  /** Called after a submission commits in this process. */
  jobQueued(applicationName: string): void {
    this.events.emit('queued', applicationName);
  }

  onQueued(callback: (applicationName: string) => void): void {
    this.events.on('queued', callback);
  }

  /** Starts listening for other nodes' notifications (a server database only: the embedded one has no other nodes). */
  async listen(): Promise<void> {
    if (this.target.kind !== 'server' || this.listening) {
      return;
    }
    this.listening = true;
    await this.connect();
  }

  private async connect(): Promise<void> {
    if (!this.listening || this.target.kind !== 'server') {
      return;
    }
    const client = new Client({
      connectionString: this.target.url,
      application_name: 'svc-listener',
      connectionTimeoutMillis: 3000,
    });
    client.on('notification', (message) => this.events.emit('queued', message.payload ?? ''));
    client.on('error', (error) => {
      this.logger.warn(`LISTEN connection lost (${error.message}); polling until it is back`);
      this.scheduleReconnect(client);
    });
    client.on('end', () => this.scheduleReconnect(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${JOB_QUEUED_CHANNEL}`);
      this.listener = client;
    } catch (error) {
      this.logger.warn(
        `could not LISTEN (${(error as Error).message}); retrying, polling meanwhile`,
      );
      this.scheduleReconnect(client);
    }
  }

  private scheduleReconnect(client: Client): void {
    if (this.listener === client) {
      this.listener = null;
    }
    client.removeAllListeners();
    client.on('error', () => undefined);
    void client.end().catch(() => undefined);
    if (!this.listening || this.reconnectTimer) {
      return;
    }
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      void this.connect();
    }, 2000);
  }

  async onApplicationShutdown(): Promise<void> {
    this.listening = false;
    if (this.reconnectTimer) {
      clearTimeout(this.reconnectTimer);
    }
    this.events.removeAllListeners();
    const client = this.listener;
    this.listener = null;
    if (client) {
      client.removeAllListeners();
      client.on('error', () => undefined);
      await client.end().catch(() => undefined);
    }
  }
}
