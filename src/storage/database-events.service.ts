import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { backOffDelay } from '../common/back-off';
import { DATABASE_TARGET, DatabaseTarget } from './database-options';
import { NodeIdentity } from './node-identity';
import { outsideRequests } from '../common/outside-requests';

/**
 * The reconnect delay after the first failure, at most; it doubles with each failure up to the
 * maximum, drawn between half and all of that (backOffDelay) so that nodes do not all come
 * back at once.
 */
const FIRST_RECONNECT_MS = 500;
const MAX_RECONNECT_MS = 10_000;
/**
 * How often the LISTEN connection is asked for a sign of life, and how long it has to give one.
 * A connection cut without a word (a route dropped, a peer frozen) only stops delivering
 * notifications; TCP notices after many minutes, if ever, while every live log stream and
 * waiting request depends on them. One `SELECT 1` per node every 30 s finds it instead, and
 * the reconnect tells subscribers to look again (onListening).
 */
export const LIVENESS_CHECK_MS = 30_000;
export const LIVENESS_TIMEOUT_MS = 10_000;
/** The LISTEN session's application_name (pg_stat_activity). */
export const LISTEN_APPLICATION_NAME = 'svc-listener';

/**
 * The NOTIFY payload format: `<node id> <payload>`. The node id (NodeIdentity: no spaces) is the
 * sender's, so a node ignores its own notifications when they come back over LISTEN (it
 * delivered them in-process already). A payload sent by SQL that knows no node starts with
 * the space (an empty node id) and is delivered to every node; so is one with no space at all
 * (a job id, a job kind, `<application>/<section>`).
 */
export function notificationPrefix(nodeId: string): string {
  return `${nodeId} `;
}

/** The sender's node id ('' for none) and the payload of a notification. */
export function parseNotification(raw: string): { sender: string; payload: string } {
  const space = raw.indexOf(' ');
  return space < 0
    ? { sender: '', payload: raw }
    : { sender: raw.slice(0, space), payload: raw.slice(space + 1) };
}

/**
 * How this node hears the notifications of other nodes:
 * - 'listen': on its one LISTEN connection (DATABASE_LISTEN_URL, or DATABASE_URL without a
 *   pooler);
 * - 'unheard': not at all (DATABASE_URL through a transaction-mode pooler, no
 *   DATABASE_LISTEN_URL), so whoever waits for another node polls;
 * - 'single-node': there are none (the embedded database belongs to this process).
 */
export type OtherNodes = 'listen' | 'unheard' | 'single-node';

type Listener = (payload: string) => void;

/**
 * The node's database events: publish on a channel, subscribe to a channel. Delivery to this
 * node's subscribers is in-process and at once; other nodes hear a NOTIFY on their one LISTEN
 * connection (a dedicated session, since LISTEN belongs to a session: never a transaction-mode
 * pooler). Notifications are hints: those sent while the connection is down are lost, so a
 * subscriber looks at the database again when it is back (onListening).
 *
 * The payload format is `<node id> <payload>` (notificationPrefix). Statements that change data
 * send their NOTIFY themselves, in the same statement or transaction (delivered at commit,
 * atomic with the change, no extra round trip), with this node's prefix; after the commit the
 * caller delivers in-process (deliverHere).
 */
@Injectable()
export class DatabaseEvents implements OnApplicationShutdown {
  private readonly logger = new Logger(DatabaseEvents.name);
  private readonly listeners = new Map<string, Set<Listener>>();
  private readonly listeningListeners = new Set<() => void>();
  private readonly lostListeners = new Set<() => void>();
  readonly otherNodes: OtherNodes;
  private readonly listenUrl: string | null;
  private client: Client | null = null;
  private active = false;
  private connecting: Promise<void> = Promise.resolve();
  private reconnectTimer: NodeJS.Timeout | null = null;
  /** Failures since the connection last listened: the back-off's attempt number. */
  private reconnectFailures = 0;
  /** Between a lost connection (or a failed first attempt) and the next one that listens. */
  private outage = false;
  /** LISTEN statements for channels subscribed while the connection was up. */
  private pendingListens: Promise<unknown> = Promise.resolve();
  /** Resolved when the current connection is lost: a statement sent on it stops waiting. */
  private clientGone: Promise<void> = Promise.resolve();
  private markClientGone: () => void = () => undefined;
  private livenessTimer: NodeJS.Timeout | null = null;
  /** On the embedded database: stops hearing the notifications its clients send. */
  private readonly stopHearingEmbedded: (() => void) | null = null;

  constructor(
    @Inject(DATABASE_TARGET) target: DatabaseTarget,
    private readonly node: NodeIdentity,
    @InjectDataSource() private readonly dataSource: DataSource,
  ) {
    this.listenUrl = target.kind === 'server' ? target.listenUrl : null;
    this.otherNodes =
      target.kind === 'embedded' ? 'single-node' : this.listenUrl ? 'listen' : 'unheard';
    if (target.kind === 'embedded' && target.onNotification) {
      // The command line writes through this process's socket: its NOTIFYs are heard here.
      this.stopHearingEmbedded = target.onNotification((channel, raw) => {
        if (this.listeners.has(channel)) {
          this.onNotification(channel, raw);
        }
      });
    }
  }

  /** What this node's statements put before the payloads they notify. */
  get prefix(): string {
    return notificationPrefix(this.node.id);
  }

  /** True while the LISTEN connection is up. */
  get listening(): boolean {
    return this.client !== null;
  }

  /**
   * Sends `payload` on `channel`: to this node's subscribers at once, to the other nodes by
   * NOTIFY through the ordinary connection (a pooler passes it on). Resolves once sent.
   */
  async publish(channel: string, payload: string): Promise<void> {
    if (this.otherNodes !== 'single-node') {
      await this.dataSource.query('SELECT pg_notify($1, $2)', [channel, this.prefix + payload]);
    }
    this.deliverHere(channel, payload);
  }

  /**
   * Delivers `payload` to this node's subscribers of `channel` at once, for a NOTIFY that a
   * committed statement sent itself with this node's prefix: its echo is ignored.
   */
  deliverHere(channel: string, payload: string): void {
    // Called by the request that made the change; what the listeners start is not its work.
    outsideRequests(() => {
      for (const listener of [...(this.listeners.get(channel) ?? [])]) {
        this.call(listener, payload, channel);
      }
    });
  }

  /**
   * Calls `listener` with each payload published on `channel` from now on, by this node or
   * another. Starts the LISTEN connection with the first subscriber. Returns unsubscribe.
   */
  subscribe(channel: string, listener: (payload: string) => void): () => void {
    checkChannel(channel);
    let channelListeners = this.listeners.get(channel);
    if (!channelListeners) {
      channelListeners = new Set();
      this.listeners.set(channel, channelListeners);
      const client = this.client;
      if (client) {
        // A new channel on the open connection; at each reconnect all channels are listened to.
        void this.onConnection(client, `LISTEN ${channel}`);
      }
      if (this.stopHearingEmbedded) {
        this.dataSource.query(`LISTEN ${channel}`).catch((error: Error) => {
          this.logger.warn(`LISTEN ${channel} failed: ${error.message}`);
        });
      }
    }
    // One entry per subscription, so the same function subscribed twice is called twice.
    const entry: Listener = (payload) => listener(payload);
    channelListeners.add(entry);
    void this.listen();
    return () => {
      channelListeners.delete(entry);
    };
  }

  /**
   * Calls `listener` each time the LISTEN connection is (re)established: notifications sent
   * while it was down are lost, so a subscriber looks at the database again. Returns unsubscribe.
   */
  onListening(listener: () => void): () => void {
    return this.hook(this.listeningListeners, listener);
  }

  /** Calls `listener` each time the LISTEN connection is lost. Returns unsubscribe. */
  onLost(listener: () => void): () => void {
    return this.hook(this.lostListeners, listener);
  }

  /**
   * Starts the LISTEN connection (when other nodes can be heard); resolves after the first
   * attempt and the LISTEN of every channel subscribed so far.
   */
  async listen(): Promise<void> {
    if (this.otherNodes !== 'listen') {
      return;
    }
    if (!this.active) {
      this.active = true;
      this.connecting = this.connect();
    }
    await this.connecting;
    await this.pendingListens;
  }

  async onApplicationShutdown(): Promise<void> {
    this.active = false;
    this.stopHearingEmbedded?.();
    this.stopLivenessChecks();
    if (this.reconnectTimer) {
      clearTimeout(this.reconnectTimer);
      this.reconnectTimer = null;
    }
    await this.connecting;
    await this.pendingListens;
    const client = this.client;
    this.client = null;
    if (client) {
      await closeQuietly(client);
    }
    this.listeners.clear();
    this.listeningListeners.clear();
    this.lostListeners.clear();
  }

  private hook(listeners: Set<() => void>, listener: () => void): () => void {
    const entry = (): void => listener();
    listeners.add(entry);
    void this.listen();
    return () => {
      listeners.delete(entry);
    };
  }

  private call(listener: Listener, payload: string, event: string): void {
    try {
      listener(payload);
    } catch (error) {
      this.logger.warn(`a listener of ${event} failed: ${(error as Error).message}`);
    }
  }

  private onNotification(channel: string, raw: string): void {
    const { sender, payload } = parseNotification(raw);
    if (sender !== this.node.id) {
      this.deliverHere(channel, payload);
    }
  }

  private async connect(): Promise<void> {
    if (!this.active || !this.listenUrl) {
      return;
    }
    const client = new Client({
      connectionString: this.listenUrl,
      application_name: LISTEN_APPLICATION_NAME,
      connectionTimeoutMillis: 3000,
    });
    client.on('notification', (message) =>
      this.onNotification(message.channel, message.payload ?? ''),
    );
    client.on('error', (error) => this.lost(client, error.message));
    client.on('end', () => this.lost(client, 'the connection ended'));
    try {
      await client.connect();
      const listened = new Set<string>();
      // Again for channels first subscribed while the previous LISTEN ran.
      for (let channels = [...this.listeners.keys()]; channels.length > 0;) {
        await client.query(channels.map((channel) => `LISTEN ${channel}`).join('; '));
        channels.forEach((channel) => listened.add(channel));
        channels = [...this.listeners.keys()].filter((channel) => !listened.has(channel));
      }
    } catch (error) {
      this.lost(client, (error as Error).message);
      return;
    }
    if (!this.active) {
      // Stopped while connecting.
      await closeQuietly(client);
      return;
    }
    this.client = client;
    this.clientGone = new Promise<void>((resolve) => (this.markClientGone = resolve));
    this.startLivenessChecks(client);
    if (this.outage) {
      this.outage = false;
      this.logger.log('LISTEN connection back');
    }
    this.reconnectFailures = 0;
    this.listeningListeners.forEach((listener) => this.call(listener, '', 'listening'));
  }

  /**
   * Sends `sql` on the open connection after the statements already sent there (a pg client
   * must not be given a query while one runs); resolves with true when it was answered, false
   * when it failed or the connection was lost first (its 'error' or the liveness check says so).
   */
  private onConnection(client: Client, sql: string): Promise<boolean> {
    const gone = this.clientGone.then(() => false);
    const answered = this.pendingListens.then(() =>
      Promise.race([
        client.query(sql).then(
          () => true,
          () => false,
        ),
        gone,
      ]),
    );
    this.pendingListens = answered;
    return answered;
  }

  private startLivenessChecks(client: Client): void {
    this.stopLivenessChecks();
    let checking = false;
    this.livenessTimer = setInterval(() => {
      if (checking || this.client !== client) {
        return;
      }
      checking = true;
      const timeout = setTimeout(
        () => this.lost(client, `no answer to a check within ${LIVENESS_TIMEOUT_MS / 1000} s`),
        LIVENESS_TIMEOUT_MS,
      );
      void this.onConnection(client, 'SELECT 1').then(() => {
        clearTimeout(timeout);
        checking = false;
      });
    }, LIVENESS_CHECK_MS);
    this.livenessTimer.unref();
  }

  private stopLivenessChecks(): void {
    if (this.livenessTimer) {
      clearInterval(this.livenessTimer);
      this.livenessTimer = null;
    }
  }

  /** The connection was lost or could not be made: retries after the back-off. */
  private lost(client: Client, reason: string): void {
    const wasUp = this.client === client;
    if (wasUp) {
      this.client = null;
      this.stopLivenessChecks();
      // Statements still waiting on it end; the next connection listens to every channel.
      this.markClientGone();
      this.pendingListens = Promise.resolve();
    } else if (this.client !== null || this.reconnectTimer) {
      return; // a late event of a connection already replaced or given up
    }
    void closeQuietly(client);
    if (!this.active) {
      return;
    }
    // Logged once per outage: the first failure, then only when the connection is back.
    if (!this.outage) {
      this.outage = true;
      this.logger.warn(`no LISTEN connection (${reason}); reconnecting, polling meanwhile`);
    }
    if (wasUp) {
      this.lostListeners.forEach((listener) => this.call(listener, '', 'lost'));
    }
    this.reconnectFailures += 1;
    const delay = backOffDelay(this.reconnectFailures, FIRST_RECONNECT_MS, MAX_RECONNECT_MS);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      this.connecting = this.connect();
    }, delay);
  }
}

/** Channels are spliced into LISTEN statements: plain lower-case identifiers only. */
function checkChannel(channel: string): void {
  if (!/^[a-z_][a-z0-9_]*$/.test(channel)) {
    throw new Error(`not a channel name: ${channel}`);
  }
}

async function closeQuietly(client: Client): Promise<void> {
  client.removeAllListeners();
  client.on('error', () => undefined);
  await client.end().catch(() => undefined);
}
