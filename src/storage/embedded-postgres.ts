import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';

/**
 * The embedded default: PGlite (PostgreSQL compiled to WebAssembly) with its data under
 * `<dataDir>/pgdata`, served on a private Unix socket so that the service talks to it with
 * the same `pg` driver, entities, migrations and SQL as to a real server.
 *
 * PGlite is one session; its socket server multiplexes connections and runs one transaction
 * at a time, so the service uses a single pooled connection with it (see database-options.ts).
 * The data directory belongs to one process: stop the service before running the CLI on it.
 */
export class EmbeddedPostgres {
  private constructor(
    private readonly db: PGlite,
    private readonly server: PGLiteSocketServer,
    private readonly socketDir: string,
  ) {}

  /** Connection URL for `pg` (host = the socket's directory). */
  get url(): string {
    return `postgresql://postgres@localhost/postgres?host=${encodeURIComponent(this.socketDir)}`;
  }

  get socketDirectory(): string {
    return this.socketDir;
  }

  static async start(dataDir: string): Promise<EmbeddedPostgres> {
    const pgdata = join(dataDir, 'pgdata');
    mkdirSync(pgdata, { recursive: true });
    let db: PGlite;
    try {
      db = await PGlite.create(pgdata);
    } catch (error) {
      throw new Error(
        `The embedded database in ${pgdata} could not be opened (${(error as Error).message}). ` +
          'Is another svc process using this DATA_DIR? Stop it, or set DATA_DIR to another directory.',
      );
    }
    // Unix socket paths are limited to ~100 bytes, so the socket lives in a short temp dir.
    const socketDir = mkdtempSync(join(tmpdir(), 'svc-pg-'));
    const server = new PGLiteSocketServer({
      db,
      path: join(socketDir, '.s.PGSQL.5432'),
      maxConnections: 16,
    });
    await server.start();
    return new EmbeddedPostgres(db, server, socketDir);
  }

  async stop(): Promise<void> {
    await this.server.stop();
    await this.db.close();
    rmSync(this.socketDir, { recursive: true, force: true });
  }
}
