/**
 * The records the console reads, as the API answers them: the types generated from the OpenAPI
 * document (clients/typescript), so a change of the API is a type error here, not a surprise.
 */
import type * as Api from '../../../../clients/typescript/src/types.js';

/** What every owned record has. */
export type Owned = Pick<Api.User, 'id' | 'created_by' | 'created_at' | 'updated_at'>;
export type User = Api.User;
export type Item = Api.Item;
export type Stock = Api.Stock;
export type Movement = Api.StockMovement;
export type OrderLine = Api.OrderLine;
export type Order = Api.Order & {
  /** Only with expand=user (lists): the user, or null when the key may not see it. */
  user?: User | null;
};
export type OrderStatus = Order['status'];
