import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { CatalogFileEntity, CatalogSection } from './catalog-file.entity';

/** The per-application catalog (SPEC §8), stored in the database so every node sees one copy. */
@Injectable()
export class CatalogService {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  async getFile(
    applicationName: string,
    section: CatalogSection,
    name: string,
  ): Promise<Buffer | null> {
    const file = await this.dataSource
      .getRepository(CatalogFileEntity)
      .findOne({ where: { applicationName, section, name }, select: { content: true } });
    return file?.content ?? null;
  }

  /** Inserts or replaces a file; returns true when it was new. */
  async putFile(
    applicationName: string,
    section: CatalogSection,
    name: string,
    content: Buffer,
  ): Promise<boolean> {
    const rows = await this.dataSource.query<Array<{ inserted: boolean }>>(
      `INSERT INTO catalog_file (application_name, section, name, content, updated_at)
       VALUES ($1, $2, $3, $4, now())
       ON CONFLICT (application_name, section, name) DO UPDATE SET content = EXCLUDED.content, updated_at = now()
       RETURNING (xmax = 0) AS inserted`,
      [applicationName, section, name, content],
    );
    return rows[0]?.inserted ?? false;
  }

  async listFiles(
    applicationName: string,
  ): Promise<Array<{ section: CatalogSection; name: string }>> {
    return this.dataSource.getRepository(CatalogFileEntity).find({
      where: { applicationName },
      select: { section: true, name: true },
      order: { section: 'ASC', name: 'ASC' },
    });
  }

  async countFiles(): Promise<number> {
    return this.dataSource.getRepository(CatalogFileEntity).count();
  }
}
