import { lstatSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
// Types only: PGlite is loaded when this process opens the database itself, so that a command
// line that finds DATA_DIR owned by a running service (its socket's client) never loads it.
import type { PGlite } from '@electric-sql/pglite';
import type { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { DataDirLock, OWNER_FILE } from './data-dir-owner';
import { DataDirUnsafeError, effectiveUid, makeTreePrivate } from './private-files';

/** The name of the database's socket in its directory (what `pg` connects to for port 5432). */
const SOCKET_NAME = '.s.PGSQL.5432';

/**
 * The socket directory a running owner's `svc.owner` names, once it is known to be this user's:
 * a directory of this user's that no one else may enter, holding a socket of this user's (the
 * database's, or `socketName`: the service's command socket). The owner file is this user's
 * already (DataDirLock), but the command line checks what it connects to as well: a socket of
 * another user's would be another database or service, answering as if it were ours.
 */
export function trustedSocketDirectory(
  dataDir: string,
  socketDirectory: string,
  socketName = SOCKET_NAME,
): string {
  const uid = effectiveUid();
  const label = socketName === SOCKET_NAME ? 'database socket' : 'command socket';
  const refuse = (what: string): never => {
    throw new DataDirUnsafeError(
      `${join(dataDir, OWNER_FILE)} names the ${label} ${join(socketDirectory, socketName)}, ` +
        `but ${what}: not connecting to it; stop the svc process that owns DATA_DIR, or run this ` +
        'command as its user',
    );
  };
  let directory;
  let socket;
  try {
    directory = lstatSync(socketDirectory);
    socket = lstatSync(join(socketDirectory, socketName));
  } catch (error) {
    return refuse(`it cannot be found (${(error as NodeJS.ErrnoException).code})`);
  }
  if (!directory.isDirectory() || directory.uid !== uid || (directory.mode & 0o077) !== 0) {
    refuse(
      `its directory is not a private directory of this user's (uid ${directory.uid}, mode 0${(directory.mode & 0o7777).toString(8)}; this user is uid ${uid})`,
    );
  }
  if (!socket.isSocket() || socket.uid !== uid) {
    refuse(`it is not a socket of this user's (uid ${socket.uid}; this user is uid ${uid})`);
  }
  return socketDirectory;
}

type NotificationListener = (channel: string, payload: string) => void;

/** The type byte of a NotificationResponse in the PostgreSQL protocol. */
const NOTIFICATION_RESPONSE = 0x41;

/**
 * Reads the NotificationResponse messages ('A') out of the backend's protocol stream, which may
 * split a message across chunks: PGlite is one backend, so a NOTIFY sent by any client of the
 * socket (the command line's too) comes out in that client's stream only. Other messages (rows
 * of any size) are skipped without a copy; only an unfinished tail is kept, copied, since the
 * chunk's memory is PGlite's.
 */
export class NotificationReader {
  private pending: Buffer | null = null;
  /** Bytes of a message other than a notification still to come in later chunks. */
  private skip = 0;

  constructor(private readonly onNotification: NotificationListener) {}

  read(chunk: Uint8Array): void {
    let data = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    if (this.skip >= data.length) {
      this.skip -= data.length;
      return;
    }
    data = data.subarray(this.skip);
    this.skip = 0;
    if (this.pending) {
      data = Buffer.concat([this.pending, data]);
      this.pending = null;
    }
    while (data.length >= 5) {
      const end = 1 + data.readInt32BE(1);
      if (data[0] !== NOTIFICATION_RESPONSE) {
        if (data.length < end) {
          this.skip = end - data.length;
          return;
        }
      } else if (data.length < end) {
        break;
      } else {
        // Int32 process id, then the channel and the payload, each NUL-terminated.
        const body = data.subarray(9, end);
        const channelEnd = body.indexOf(0);
        this.onNotification(
          body.subarray(0, channelEnd).toString('utf8'),
          body.subarray(channelEnd + 1, body.indexOf(0, channelEnd + 1)).toString('utf8'),
        );
      }
      data = data.subarray(end);
    }
    if (data.length > 0) {
      this.pending = Buffer.from(data);
    }
  }
}

/**
 * The embedded default: PGlite (PostgreSQL compiled to WebAssembly) with its data under
 * `<dataDir>/pgdata`, served on a private Unix socket so that the service talks to it with
 * the same `pg` driver, entities, migrations and SQL as to a real server.
 *
 * PGlite is one session; its socket server multiplexes connections and runs one transaction
 * at a time, so the service uses a single pooled connection with it (see database-options.ts).
 * The data directory belongs to one process at a time (DataDirLock, `DATA_DIR/svc.owner`, which
 * also names the socket): the command line reaches a running owner's database through it.
 * Notifications sent by any client are heard in-process (onNotification), after a LISTEN.
 */
export class EmbeddedPostgres {
  private readonly notificationListeners = new Set<NotificationListener>();

  private constructor(
    private readonly lock: DataDirLock,
    private readonly db: PGlite,
    private server: PGLiteSocketServer | null,
    private readonly socketDir: string,
  ) {}

  /** Connection URL for `pg` (host = the socket's directory). */
  get url(): string {
    return `postgresql://postgres@localhost/postgres?host=${encodeURIComponent(this.socketDir)}`;
  }

  get socketDirectory(): string {
    return this.socketDir;
  }

  /**
   * Takes DATA_DIR (DataDirOwnedError when a live process owns it), opens its database and
   * serves it on a private socket, whose directory the owner file then names. What is in DATA_DIR
   * is this user's alone: PGlite writes the files of a new database with mode 0666 whatever the
   * umask (its file system sets the modes of its packed initial files), and an older version left
   * them so; they are closed (makeTreePrivate) once the database is open, before anything is
   * stored. Files PostgreSQL creates later are 0600.
   */
  static async start(dataDir: string): Promise<EmbeddedPostgres> {
    const lock = DataDirLock.acquire(dataDir);
    const pgdata = join(dataDir, 'pgdata');
    let db: PGlite;
    try {
      mkdirSync(pgdata, { recursive: true, mode: 0o700 });
      const { PGlite } = await import('@electric-sql/pglite');
      db = await PGlite.create(pgdata);
    } catch (error) {
      lock.release();
      throw new Error(
        `The embedded database in ${pgdata} could not be opened (${(error as Error).message}).`,
      );
    }
    try {
      makeTreePrivate(dataDir);
    } catch (error) {
      await db.close();
      lock.release();
      throw error;
    }
    // Unix socket paths are limited to ~100 bytes, so the socket lives in a short temp dir.
    const socketDir = mkdtempSync(join(tmpdir(), 'svc-pg-'));
    const embedded = new EmbeddedPostgres(lock, db, null, socketDir);
    try {
      await embedded.serve();
    } catch (error) {
      await embedded.stop();
      throw error;
    }
    return embedded;
  }

  private async serve(): Promise<void> {
    const { db } = this;
    const listeners = this.notificationListeners;
    // The socket server's view of the database: its output also goes past a NotificationReader.
    const watched = new Proxy(db, {
      get(target, property, receiver) {
        if (property === 'execProtocolRawStream') {
          return (
            message: Uint8Array,
            options: NonNullable<Parameters<PGlite['execProtocolRawStream']>[1]>,
          ): Promise<void> => {
            const reader = new NotificationReader((channel, payload) => {
              for (const listener of [...listeners]) {
                listener(channel, payload);
              }
            });
            return target.execProtocolRawStream(message, {
              ...options,
              onRawData: (data) => {
                reader.read(data);
                options.onRawData(data);
              },
            });
          };
        }
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? (value as () => unknown).bind(target) : value;
      },
    });
    const { PGLiteSocketServer } = await import('@electric-sql/pglite-socket');
    this.server = new PGLiteSocketServer({
      db: watched,
      path: join(this.socketDir, SOCKET_NAME),
      maxConnections: 16,
    });
    await this.server.start();
    this.lock.serving(this.socketDir);
  }

  /**
   * Calls `listener` with each notification of a channel the database LISTENs to, whichever
   * client of the socket sent it. Returns unsubscribe.
   */
  onNotification(listener: NotificationListener): () => void {
    this.notificationListeners.add(listener);
    return () => this.notificationListeners.delete(listener);
  }

  async stop(): Promise<void> {
    try {
      await this.server?.stop();
      await this.db.close();
    } finally {
      rmSync(this.socketDir, { recursive: true, force: true });
      this.lock.release();
    }
  }
}
