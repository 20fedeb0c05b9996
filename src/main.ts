// First: the heap's young generation (before anything allocates), then tracing, which must
// start before http, Express and pg are loaded.
import './young-generation';
import './tracing/register';
import 'reflect-metadata';
import pinoPretty from 'pino-pretty';
import { ConfigError, loadConfig } from './config/app-config';
import { PinoLoggerService } from './common/pino-logger';
import { startService } from './bootstrap';
import { startBufferMemoryPacer } from './common/buffer-memory-pacer';
import { SOAP_ENDPOINT_PATH } from './soap/wsdl.service';
import { AccessPolicyService, MAKE_ADMIN_COMMAND } from './security/access-policy.service';
import { connectTracingLog, flushTracing } from './tracing/tracing';

async function main(): Promise<void> {
  // A large transfer must not leave the process tens of MiB larger (docs/performance.md).
  startBufferMemoryPacer();
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      for (const problem of error.problems) {
        console.error(`svc: configuration: ${problem}`);
      }
      process.exit(78); // EX_CONFIG
    }
    throw error;
  }
  const pretty =
    config.logFormat === 'pretty' || (config.logFormat === 'auto' && process.stdout.isTTY);
  const logger = new PinoLoggerService(
    config.logLevel,
    pretty
      ? pinoPretty({
          colorize: true,
          ignore: 'pid,hostname,context',
          translateTime: 'SYS:HH:MM:ss.l',
          messageFormat: '{if context}[{context}] {end}{msg}',
        })
      : undefined,
  );
  const tracing = connectTracingLog((message) => logger.warn(message, 'Tracing'));
  if (tracing) {
    logger.log(tracing, 'Tracing');
  }
  let service;
  try {
    service = await startService(config, logger);
  } catch (error) {
    logger.fatal(`svc could not start: ${(error as Error).message}`, 'Startup');
    logger.pino.flush();
    process.exit(1);
  }
  const database = config.embeddedDatabase
    ? `embedded PostgreSQL in ${config.dataDir}`
    : 'DATABASE_URL';
  if (service.url) {
    const base = config.publicBaseUrl ?? `http://localhost:${config.port}`;
    logger.log(`svc (${config.role}) is listening on ${base}, database: ${database}`, 'Startup');
    logger.log(`REST API: ${base}/svc/api/rest/jobs`, 'Startup');
    logger.log(`Upload page: ${base}/svc/`, 'Startup');
    logger.log(`Console: ${base}/svc/console/`, 'Startup');
    logger.log(`API page: ${base}/svc/api/`, 'Startup');
    logger.log(`SOAP WSDL: ${base}${SOAP_ENDPOINT_PATH}?wsdl`, 'Startup');
    if (!service.app.get(AccessPolicyService, { strict: false }).anyAdminConfigured()) {
      // The same database as this service's: its DATA_DIR, or its DATABASE_URL.
      const where = config.embeddedDatabase
        ? process.env.DATA_DIR
          ? `DATA_DIR=${config.dataDir} `
          : ''
        : 'DATABASE_URL=… ';
      logger.warn(
        `No administrator is configured, so the console and the admin API refuse everyone. ` +
          `Make one now, keeping the data, with: ${where}${MAKE_ADMIN_COMMAND} ` +
          `(in ${process.cwd()}; it prints the password)`,
        'Startup',
      );
    }
  } else {
    logger.log(`svc worker started, database: ${database}`, 'Startup');
  }
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      return;
    }
    stopping = true;
    const bound = config.shutdownTimeoutSeconds;
    logger.log(`${signal} received: shutting down (at most ${bound} s)`, 'Startup');
    // A database that does not answer must not keep the node alive: what is in flight is left
    // to its lease, as after a crash (docs/operations.md#a-bounded-shutdown).
    setTimeout(() => {
      logger.error(
        `shutdown did not end within SHUTDOWN_TIMEOUT_SECONDS (${bound} s), the database or a job not answering: exiting; unfinished work is recovered when its lease expires`,
        'Startup',
      );
      logger.pino.flush();
      process.exit(1);
    }, bound * 1000).unref();
    service
      .close()
      // The last spans (this node's last jobs) leave before the process does.
      .then(() => flushTracing().catch(() => undefined))
      .then(
        () => process.exit(0),
        (error: Error) => {
          logger.error(`shutdown failed: ${error.message}`, 'Startup');
          process.exit(1);
        },
      );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

void main();
