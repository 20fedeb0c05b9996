import { PinoLoggerService } from './pino-logger';

function capture(): { logger: PinoLoggerService; output: () => string } {
  const lines: string[] = [];
  const logger = new PinoLoggerService('trace', { write: (line: string) => lines.push(line) });
  return { logger, output: () => lines.join('') };
}

describe('log redaction', () => {
  it('masks credentials in request headers, however the request is logged', () => {
    const { logger, output } = capture();
    const headers = {
      authorization: 'Basic dXJzdWxhOmh1bnRlcjI=',
      'x-svc-api-key': 'k1.api-key-secret',
      'proxy-authorization': 'Basic cHJveHk6cHJveHktc2VjcmV0',
      cookie: 'session=cookie-secret',
      'x-svc-application-name': 'demo',
    };
    logger.pino.info({ req: { method: 'POST', url: '/jobs', headers } }, 'request');
    logger.pino.info({ headers }, 'headers alone');
    logger.pino.info({ ...headers }, 'headers at the top');
    const logs = output();
    for (const secret of ['dXJzdWxhOmh1bnRlcjI=', 'api-key-secret', 'cHJveHk6', 'cookie-secret']) {
      expect(logs).not.toContain(secret);
    }
    expect(logs.match(/\[redacted\]/g)?.length).toBe(12);
    // What is not secret stays readable.
    expect(logs).toContain('"x-svc-application-name":"demo"');
  });

  it('masks passwords, hashes and secret configuration values', () => {
    const { logger, output } = capture();
    logger.pino.warn(
      { password: 'pw-1', user: { password: 'pw-2', passwordHash: 'scrypt$x' } },
      'a',
    );
    logger.pino.info(
      {
        config: {
          adminPassword: 'pw-3',
          databaseUrl: 'postgres://svc:pw-4@db/svc',
          users: { u: { passwordHash: 'scrypt$y' } },
          apiKeys: { k: { keyHash: 'scrypt$z' } },
          port: 8888,
        },
      },
      'b',
    );
    const logs = output();
    for (const secret of ['pw-1', 'pw-2', 'pw-3', 'pw-4', 'scrypt$']) {
      expect(logs).not.toContain(secret);
    }
    expect(logs).toContain('"port":8888');
  });
});
