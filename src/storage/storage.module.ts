import { DynamicModule, Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DatabaseEvents } from './database-events.service';
import {
  buildDataSourceOptions,
  DATABASE_TARGET,
  DatabaseSchema,
  DatabaseTarget,
} from './database-options';
import { NodeIdentity } from './node-identity';

/**
 * The database connection and the node's database events (one LISTEN connection per node).
 * Where it points (server or embedded socket) is decided at bootstrap.
 */
@Global()
@Module({})
export class StorageModule {
  static forTarget(
    target: DatabaseTarget,
    schema: DatabaseSchema,
    applicationName: string,
  ): DynamicModule {
    return {
      module: StorageModule,
      imports: [
        TypeOrmModule.forRoot({
          ...buildDataSourceOptions(target, schema, applicationName),
          retryAttempts: 0,
        }),
      ],
      providers: [{ provide: DATABASE_TARGET, useValue: target }, NodeIdentity, DatabaseEvents],
      exports: [DATABASE_TARGET, TypeOrmModule, NodeIdentity, DatabaseEvents],
    };
  }
}
