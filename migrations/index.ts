import { MigrationInterface } from 'typeorm';
import { CreateCoreTables1795341869415 } from './1795341869415-CreateCoreTables';

/** Every migration, oldest first. Listed here so the same list works from TypeScript and from dist/. */
export const MIGRATIONS: Array<new () => MigrationInterface> = [CreateCoreTables1795341869415];
