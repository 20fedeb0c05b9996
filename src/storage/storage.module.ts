import { DynamicModule, Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { buildDataSourceOptions, DatabaseSchema, DatabaseTarget } from './database-options';
import { NodeIdentity } from './node-identity';

export const DATABASE_TARGET = Symbol('DATABASE_TARGET');

/** The database connection. Where it points (server or embedded socket) is decided at bootstrap. */
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
      providers: [{ provide: DATABASE_TARGET, useValue: target }, NodeIdentity],
      exports: [DATABASE_TARGET, TypeOrmModule, NodeIdentity],
    };
  }
}
