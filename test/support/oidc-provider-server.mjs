// A real OpenID Provider (oidc-provider) for the tests, in its own process: oidc-provider is
// published as ES modules only, and a process can be stopped and started again on the same port
// with other keys, as an identity provider is during an outage or a key rotation.
//
// Reads its settings as JSON from OIDC_TEST_PROVIDER (see test/support/oidc-provider.ts) and
// prints one line `listening <port>` once it answers.
import { createServer } from 'node:http';
import Provider, { errors } from 'oidc-provider';

const settings = JSON.parse(process.env.OIDC_TEST_PROVIDER);
const issuer = `http://127.0.0.1:${settings.port}`;
/** Claims each client's tokens carry besides the standard ones, and each account's. */
const clientClaims = settings.clientClaims;
const accountClaims = settings.accountClaims;

const provider = new Provider(issuer, {
  clients: settings.clients,
  jwks: { keys: settings.keys },
  findAccount: (_ctx, id) => ({
    accountId: id,
    claims: () => ({ sub: id, preferred_username: id }),
  }),
  // Keycloak puts the user's name and roles into the access token; Entra ID its roles and groups.
  extraTokenClaims: (_ctx, token) =>
    token.accountId !== undefined
      ? { preferred_username: token.accountId, ...accountClaims[token.accountId] }
      : clientClaims[token.clientId],
  features: {
    clientCredentials: { enabled: true },
    devInteractions: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => settings.audience,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resource) => {
        if (resource !== settings.audience) {
          throw new errors.InvalidTarget();
        }
        return {
          scope: 'svc',
          audience: settings.audience,
          accessTokenFormat: 'jwt',
          accessTokenTTL: settings.accessTokenTtlSeconds,
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  // The authorization-code client gets the API's scope without a consent page of its own.
  loadExistingGrant: async (ctx) => {
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId,
      accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope('openid profile');
    grant.addResourceScope(settings.audience, 'svc');
    await grant.save();
    return grant;
  },
  pkce: { required: () => true },
  ttl: {
    AccessToken: settings.accessTokenTtlSeconds,
    ClientCredentials: settings.accessTokenTtlSeconds,
  },
});
provider.on('server_error', (_ctx, error) => console.error(error));

const server = createServer(provider.callback());
server.listen(settings.port, '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
process.on('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
