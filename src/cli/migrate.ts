import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_ROOT_DIR } from '../config/project-root';
import {
  CliCommand,
  CommandFailed,
  parseCommandArgs,
  UsageError,
} from '../command-line/cli-command';
import { describeDatabase } from './run-command';

const USAGE = `usage: svc migrate run | revert | show | generate <Name>
  run       apply the pending migrations
  revert    undo the newest applied migration
  show      list the migrations, [X] applied, [ ] pending (exit status 1 when any is pending)
  generate  write a migration for what the entities changed (developers; needs the sources)`;

function migrationSource(className: string, up: string[], down: string[]): string {
  const lines = (queries: string[]) =>
    queries.map((q) => `    await queryRunner.query(${JSON.stringify(q)});`).join('\n');
  return `import { MigrationInterface, QueryRunner } from 'typeorm';

export class ${className} implements MigrationInterface {
  name = '${className}';

  public async up(queryRunner: QueryRunner): Promise<void> {
${lines(up)}
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
${lines(down)}
  }
}
`;
}

const COMMANDS = new Set(['run', 'revert', 'show', 'generate']);

async function migrate(argv: string[]): Promise<number> {
  const { positionals } = parseCommandArgs(argv, {});
  const [command, name] = positionals;
  if (!COMMANDS.has(command)) {
    throw new UsageError(command ? `unknown migrate command "${command}"` : 'missing command');
  }
  if (positionals.length > (command === 'generate' ? 2 : 1)) {
    throw new UsageError('too many arguments');
  }
  if (command === 'generate' && (!name || !/^[A-Z][A-Za-z0-9]*$/.test(name))) {
    throw new UsageError('generate needs a PascalCase name, e.g. AddJobPriority');
  }
  // What acting needs, loaded once the arguments are right.
  const { loadConfig, quietServiceLogs } = await import('./cli-state');
  const { openDatabaseForCli, pendingMigrations } = await import('../storage/database-options');
  const { DATABASE_SCHEMA } = await import('../database-schema');
  const { schemaDiff } = await import('../storage/schema-diff');
  quietServiceLogs();
  const config = loadConfig();
  const where = describeDatabase(config);
  const { dataSource, viaService, close } = await openDatabaseForCli(config, DATABASE_SCHEMA).catch(
    (error: Error) => {
      throw new Error(
        `cannot open the ${where} (${error.message}); check DATABASE_URL and that the server runs`,
      );
    },
  );
  try {
    if (viaService && command !== 'show') {
      throw new CommandFailed(
        `DATA_DIR ${config.dataDir} is in use by a running svc, which applies the ` +
          'migrations at its start; stop it first to run, revert or generate migrations',
      );
    }
    switch (command) {
      case 'run': {
        const ran = await dataSource.runMigrations({ transaction: 'each' });
        for (const migration of ran) {
          console.log(`applied ${migration.name}`);
        }
        console.log(
          ran.length === 0
            ? `No pending migrations (${where}).`
            : `Ran ${ran.length} migration(s) on the ${where}.`,
        );
        return 0;
      }
      case 'revert': {
        const before = await pendingMigrations(dataSource);
        await dataSource.undoLastMigration({ transaction: 'each' });
        const after = await pendingMigrations(dataSource);
        const reverted = after.filter((m) => !before.includes(m));
        console.log(
          reverted.length
            ? `Reverted ${reverted.join(', ')} on the ${where}.`
            : `Nothing to revert (${where}).`,
        );
        return 0;
      }
      case 'show': {
        const pending = new Set(await pendingMigrations(dataSource));
        for (const migration of dataSource.migrations) {
          const migrationName = migration.name ?? migration.constructor.name;
          console.log(`${pending.has(migrationName) ? '[ ]' : '[X]'} ${migrationName}`);
        }
        console.log(
          pending.size
            ? `${pending.size} pending on the ${where}; apply with \`svc migrate run\`.`
            : `Up to date (${where}).`,
        );
        return pending.size ? 1 : 0;
      }
      case 'generate': {
        const { up, down } = await schemaDiff(dataSource);
        if (up.length === 0) {
          console.log('Entities and migrations agree: nothing to generate.');
          return 0;
        }
        const timestamp = Date.now();
        const file = join(PROJECT_ROOT_DIR, 'migrations', `${timestamp}-${name}.ts`);
        writeFileSync(file, migrationSource(`${name}${timestamp}`, up, down));
        console.log(`Wrote ${file}; add it to migrations/index.ts.`);
        return 0;
      }
      default:
        throw new UsageError(`unknown migrate command "${command}"`);
    }
  } finally {
    await close();
  }
}

export const migrateCommand: CliCommand = {
  name: 'migrate',
  summary: 'apply, revert or list the database migrations',
  usage: USAGE,
  run: migrate,
};
