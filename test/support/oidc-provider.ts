import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, type JWK } from 'jose';

/** The API's audience in the provider's tokens (its resource indicator). */
export const TEST_AUDIENCE = 'https://svc.example.test/api';

/** A client of the provider: its id, secret and what grants it may use. */
export interface TestClient {
  client_id: string;
  client_secret: string;
  grant_types: string[];
  response_types: string[];
  redirect_uris: string[];
  token_endpoint_auth_method?: string;
}

export interface OidcProviderOptions {
  clients: TestClient[];
  /** Extra claims in the access tokens of a client-credentials client, by client id. */
  clientClaims?: Record<string, Record<string, unknown>>;
  /** Extra claims in the access tokens of a signed-in account, by account id (the login name). */
  accountClaims?: Record<string, Record<string, unknown>>;
  accessTokenTtlSeconds?: number;
}

/** A private RSA signing key as a JWK, with its key id. */
export async function signingKey(kid: string): Promise<JWK> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  return { ...(await exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' };
}

/** The public part of a private RSA JWK. */
export function publicPart(key: JWK): JWK {
  const { kty, n, e, kid, alg, use } = key;
  return { kty, n, e, kid, alg, use };
}

/**
 * oidc-provider on 127.0.0.1 in a child process (test/support/oidc-provider-server.mjs): the
 * issuer, its clients, and stop/start on the same port with other keys.
 */
export class TestOidcProvider {
  private child: ChildProcess | null = null;

  private constructor(
    readonly port: number,
    private readonly options: OidcProviderOptions,
    /** The provider's private keys; the first signs. */
    public keys: JWK[],
  ) {}

  static async start(options: OidcProviderOptions, keys: JWK[]): Promise<TestOidcProvider> {
    const provider = new TestOidcProvider(await freePort(), options, keys);
    await provider.startProcess();
    return provider;
  }

  get issuer(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.child !== null;
  }

  /** Starts it again (after stop), with `keys` if given: a key rotation. */
  async restart(keys: JWK[] = this.keys): Promise<void> {
    await this.stop();
    this.keys = keys;
    await this.startProcess();
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (child === null) {
      return;
    }
    this.child = null;
    if (child.exitCode === null) {
      await new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      });
    }
  }

  /** An access token for the API from the client-credentials grant. */
  async clientCredentialsToken(client: TestClient): Promise<string> {
    const answer = await fetch(`${this.issuer}/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${client.client_id}:${client.client_secret}`).toString('base64')}`,
      },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        scope: 'svc',
        resource: TEST_AUDIENCE,
      }),
    });
    const body = (await answer.json()) as { access_token?: string };
    if (!answer.ok || typeof body.access_token !== 'string') {
      throw new Error(`the provider refused a token: ${answer.status} ${JSON.stringify(body)}`);
    }
    return body.access_token;
  }

  private async startProcess(): Promise<void> {
    const child = spawn(process.execPath, [join(__dirname, 'oidc-provider-server.mjs')], {
      env: {
        ...process.env,
        NODE_ENV: 'development',
        OIDC_TEST_PROVIDER: JSON.stringify({
          port: this.port,
          audience: TEST_AUDIENCE,
          clients: this.options.clients,
          clientClaims: this.options.clientClaims ?? {},
          accountClaims: this.options.accountClaims ?? {},
          keys: this.keys,
          accessTokenTtlSeconds: this.options.accessTokenTtlSeconds ?? 300,
        }),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    let errors = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      errors += chunk.toString();
    });
    await new Promise<void>((resolve, reject) => {
      child.stdout?.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('listening')) {
          resolve();
        }
      });
      child.once('exit', (code) =>
        reject(new Error(`the OpenID provider exited (${code}) before listening: ${errors}`)),
      );
    });
  }
}

/** A TCP port free on 127.0.0.1 now, so the provider can come back on the same one. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
