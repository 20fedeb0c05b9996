import type { NewApiKeyDto } from '../api-keys/new-api-key.dto';
import {
  checkedAs,
  CommandFailed,
  CommandOutput,
  parseCommandArgs,
  ServiceCommand,
  UsageError,
} from './cli-command';
import { cliActor } from './cli-actor';
import type { CommandServices } from './command-services';

const USAGE = `usage: svc keys create <principal> [--roles a,b] [--expires <time>] | list | revoke <keyId>
  create <principal>   make an API key in the database: prints the key (<keyId>.<secret>, shown
                       once, for the client), then its id; --expires takes ISO 8601 with a zone,
                       e.g. 2027-01-31T00:00:00Z
  list                 the keys made at run time, tab-separated under a header row (id,
                       principal, roles, created, expires, last used)
  revoke <keyId>       delete a key: every node refuses it within a second
Keys of API_KEYS (the configuration) are not listed or revoked here.`;

/** The first line of `keys list`: the names of its tab-separated columns. */
const KEYS_HEADER = ['ID', 'PRINCIPAL', 'ROLES', 'CREATED', 'EXPIRES', 'LAST USED'].join('\t');

type KeysRequest =
  | { command: 'create'; principal: string; roles: string[]; expires: string | null }
  | { command: 'list' }
  | { command: 'revoke'; keyId: string };

function parseKeysArgs(argv: string[]): KeysRequest {
  const { positionals, values } = parseCommandArgs(argv, {
    roles: { type: 'string' },
    expires: { type: 'string' },
  });
  const [command, argument, ...extra] = positionals;
  if (extra.length > 0) {
    throw new UsageError('too many arguments');
  }
  if (command !== 'create' && (values.roles !== undefined || values.expires !== undefined)) {
    throw new UsageError('--roles and --expires are options of keys create');
  }
  switch (command) {
    case 'create':
      if (!argument) {
        throw new UsageError('keys create needs a principal');
      }
      return {
        command,
        principal: argument,
        roles: values.roles ? values.roles.split(',').filter((role) => role !== '') : [],
        expires: values.expires ?? null,
      };
    case 'list':
      if (argument) {
        throw new UsageError('too many arguments');
      }
      return { command };
    case 'revoke':
      if (!argument) {
        throw new UsageError('keys revoke needs a key id');
      }
      return { command, keyId: argument };
    default:
      throw new UsageError(command ? `unknown keys command "${command}"` : 'missing command');
  }
}

/** The create command's key, checked as the admin API checks it. */
async function createRequest(
  parsed: Extract<KeysRequest, { command: 'create' }>,
): Promise<NewApiKeyDto> {
  const { NewApiKeyDto } = await import('../api-keys/new-api-key.dto');
  return checkedAs(
    { principal: parsed.principal, roles: parsed.roles, expiresAt: parsed.expires },
    NewApiKeyDto,
    { expiresAt: '--expires', roles: '--roles' },
  );
}

async function actOnKeys(
  request: KeysRequest,
  services: CommandServices,
  output: CommandOutput,
): Promise<number> {
  const actor = cliActor();
  switch (request.command) {
    case 'create': {
      const created = await (
        await services.apiKeys()
      ).create(await createRequest(request), null, actor);
      output.out(created.key);
      output.err(
        `created API key ${created.listing.id} for ${created.listing.principal}` +
          (created.listing.expiresAt ? `, expires ${created.listing.expiresAt.toISOString()}` : ''),
      );
      return 0;
    }
    case 'list':
      output.out(KEYS_HEADER);
      for (const key of await (await services.apiKeys()).list()) {
        output.out(
          [
            key.id,
            key.principal,
            key.roles.join(',') || '-',
            key.createdAt.toISOString(),
            key.expiresAt?.toISOString() ?? 'never',
            key.lastUsedAt?.toISOString() ?? 'unused',
          ].join('\t'),
        );
      }
      return 0;
    case 'revoke':
      if (await (await services.apiKeys()).revoke(request.keyId, actor)) {
        output.out(`revoked ${request.keyId}`);
        return 0;
      }
      throw new CommandFailed(`no API key ${request.keyId} in the database`);
  }
}

export const keysCommand: ServiceCommand<KeysRequest> = {
  name: 'keys',
  summary: 'create, list or revoke API keys kept in the database',
  usage: USAGE,
  parse: parseKeysArgs,
  check: async (request) => {
    if (request.command === 'create') {
      await createRequest(request);
    }
  },
  act: actOnKeys,
};
