import { DataSource } from 'typeorm';

/** The SQL that would bring the database in line with the entities: empty when migrations and entities agree. */
export async function schemaDiff(
  dataSource: DataSource,
): Promise<{ up: string[]; down: string[] }> {
  const log = await dataSource.driver.createSchemaBuilder().log();
  return {
    up: log.upQueries.map((q) => q.query),
    down: log.downQueries.map((q) => q.query).reverse(),
  };
}
