import type { Executor } from '../db/database.js';
import { whereVisible, type Sight } from '../db/visibility.js';

/** Whether user `userId` exists and `sight` shows it: the one a token may be asked to act for. */
export async function isVisibleUser(db: Executor, userId: number, sight: Sight): Promise<boolean> {
  const row = await whereVisible(
    db.selectFrom('users').select('id').where('id', '=', userId),
    'users',
    sight,
  ).executeTakeFirst();
  return row !== undefined;
}
