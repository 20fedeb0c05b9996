import type { NewApiKeyDto } from '../api-keys/new-api-key.dto';
import { CliCommand, CommandFailed, parseCommandArgs, UsageError } from './cli-command';
import { cliActor } from './run-command';

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

type KeysCommand =
  | { command: 'create'; principal: string; roles: string[]; expires: string | null }
  | { command: 'list' }
  | { command: 'revoke'; keyId: string };

function parseKeysArgs(argv: string[]): KeysCommand {
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

/** The create command's key, checked as the admin API checks it; its complaints are usage errors. */
async function createRequest(
  parsed: Extract<KeysCommand, { command: 'create' }>,
): Promise<NewApiKeyDto> {
  const { HttpException } = await import('@nestjs/common');
  const { DTO_VALIDATION } = await import('../common/dto-validation');
  const { NewApiKeyDto } = await import('../api-keys/new-api-key.dto');
  try {
    return (await DTO_VALIDATION.transform(
      { principal: parsed.principal, roles: parsed.roles, expiresAt: parsed.expires },
      { type: 'custom', metatype: NewApiKeyDto },
    )) as NewApiKeyDto;
  } catch (error) {
    throw new UsageError(error instanceof HttpException ? error.message : String(error));
  }
}

async function keys(argv: string[]): Promise<number> {
  const parsed = parseKeysArgs(argv);
  const request = parsed.command === 'create' ? await createRequest(parsed) : null;
  // What acting needs, loaded once the arguments are right.
  const { loadConfig, openStateForCli } = await import('./cli-state');
  const { ApiKeysService } = await import('../api-keys/api-keys.service');
  const { ApiKeyRepository } = await import('../api-keys/api-key.repository');
  const { AuditService } = await import('../audit/audit.service');
  const { AuditRepository } = await import('../audit/audit.repository');
  const config = loadConfig();
  const { dataSource, close } = await openStateForCli(config);
  try {
    // No DatabaseEvents here: a revocation notifies with no node id, so every node hears it.
    const service = new ApiKeysService(
      new ApiKeyRepository(dataSource),
      undefined,
      new AuditService(new AuditRepository(dataSource), config),
    );
    const actor = cliActor();
    switch (parsed.command) {
      case 'create': {
        if (request === null) {
          return 2;
        }
        const created = await service.create(request, null, actor);
        console.log(created.key);
        console.error(
          `created API key ${created.listing.id} for ${created.listing.principal}` +
            (created.listing.expiresAt
              ? `, expires ${created.listing.expiresAt.toISOString()}`
              : ''),
        );
        return 0;
      }
      case 'list':
        console.log(KEYS_HEADER);
        for (const key of await service.list()) {
          console.log(
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
        if (await service.revoke(parsed.keyId, actor)) {
          console.log(`revoked ${parsed.keyId}`);
          return 0;
        }
        throw new CommandFailed(`no API key ${parsed.keyId} in the database`);
    }
  } finally {
    await close();
  }
}

export const keysCommand: CliCommand = {
  name: 'keys',
  summary: 'create, list or revoke API keys kept in the database',
  usage: USAGE,
  run: keys,
};
