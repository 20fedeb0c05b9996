import { MigrationInterface } from 'typeorm';
import { CreateCoreTables1795341869415 } from './1795341869415-CreateCoreTables';
import { BlobChunks1795445354085 } from './1795445354085-BlobChunks';

/** Every migration, oldest first. Listed here so the same list works from TypeScript and from dist/. */
export const MIGRATIONS: Array<new () => MigrationInterface> = [
  CreateCoreTables1795341869415,
  BlobChunks1795445354085,
];
