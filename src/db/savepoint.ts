import { sql } from 'kysely';
import type { Trx } from './database.js';

/**
 * Runs `work` inside a SAVEPOINT of the unit of work's transaction: when it throws, what it wrote
 * is undone (ROLLBACK TO) and the error goes on, while the rest of the transaction stays. An import
 * in partial mode places each order this way, so an order refused halfway (on PostgreSQL a
 * concurrent writer may take stock between the check and the reservation) leaves nothing behind
 * while the chunk's other orders commit. On SQLite the unit itself is a savepoint of its group
 * (group-commit.ts); savepoints nest.
 */
export async function withSavepoint<T>(trx: Trx, name: string, work: () => Promise<T>): Promise<T> {
  const id = sql.id(name);
  await sql`savepoint ${id}`.execute(trx);
  let result: T;
  try {
    result = await work();
  } catch (error) {
    await sql`rollback to savepoint ${id}`.execute(trx);
    await sql`release savepoint ${id}`.execute(trx);
    throw error;
  }
  await sql`release savepoint ${id}`.execute(trx);
  return result;
}
