import { PostgresDialect, sql, type DatabaseIntrospector, type Kysely, type TableMetadata } from 'kysely';

/**
 * Kysely's PostgreSQL dialect with an introspector that sees rowi's own schema (the first of the
 * search_path) only. Kysely's own lists every column of every table in every schema of the
 * database, checking each schema's privilege by its name: its migrator reads that at every start
 * to learn whether its two tables exist. The read grows with every schema beside rowi's, and it
 * fails ("schema … does not exist") when another schema is dropped while it runs, so a start beside
 * another instance's `drop schema` failed.
 */
export class RowiPostgresDialect extends PostgresDialect {
  override createIntrospector(db: Kysely<unknown>): DatabaseIntrospector {
    const introspector: DatabaseIntrospector = {
      async getSchemas() {
        const { rows } = await sql<{ name: string }>`select nspname as name from pg_catalog.pg_namespace`.execute(db);
        return rows;
      },
      async getTables() {
        const { rows } = await sql<{ name: string; schema: string; view: boolean }>`
          select c.relname as name, n.nspname as schema, c.relkind = 'v' as view
          from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
          where n.nspname = current_schema() and c.relkind in ('r', 'v', 'p')`.execute(db);
        return rows.map((row): TableMetadata => ({
          name: row.name,
          schema: row.schema,
          isView: row.view,
          columns: [],
        }));
      },
      async getMetadata() {
        return { tables: await introspector.getTables() };
      },
    };
    return introspector;
  }
}
