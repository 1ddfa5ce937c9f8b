import type { ImportTarget } from '../engine/imports/target.js';
import { ITEMS_IMPORT } from '../resources/items/items-import.js';
import { STOCK_IMPORT } from '../resources/items/stock-import.js';
import { ORDERS_IMPORT } from '../resources/orders/orders-import.js';
import { USERS_IMPORT } from '../resources/users/users-import.js';

/** The collections files are imported into (docs/bulk.md "Imports"): the routes take them, and so does the import thread. */
export const IMPORTERS: readonly ImportTarget[] = [USERS_IMPORT, ITEMS_IMPORT, STOCK_IMPORT, ORDERS_IMPORT];
