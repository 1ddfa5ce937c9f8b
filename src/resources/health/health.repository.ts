import { sql } from 'kysely';
import type { Executor } from '../../db/database.js';

/** Whether the database answers: the cheapest statement it can run. Throws when it does not. */
export async function pingDatabase(db: Executor): Promise<void> {
  await sql`select 1`.execute(db);
}
