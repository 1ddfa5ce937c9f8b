/** The records the console reads, as the API answers them (openapi/v1.json). */
export interface Owned {
  id: number;
  created_by: number | null;
  created_at: string;
  updated_at: string;
}
export interface User extends Owned {
  name: string;
  email: string;
}
export interface Item extends Owned {
  name: string;
  sku: string;
  price: string;
}
export interface Stock {
  item_id: number;
  quantity: number;
  reserved: number;
  updated_at: string;
}
export interface Movement {
  id: number;
  item_id: number;
  kind: 'set' | 'reserve' | 'release' | 'fulfil';
  quantity_change: number;
  reserved_change: number;
  quantity_after: number;
  reserved_after: number;
  order_id: number | null;
  created_at: string;
}
export interface OrderLine {
  item_id: number;
  quantity: number;
  unit_price: string;
  line_total: string;
}
export type OrderStatus = 'placed' | 'fulfilled' | 'cancelled';
export interface Order extends Owned {
  name: string;
  user_id: number | null;
  status: OrderStatus;
  lines: OrderLine[];
  total: string;
  /** Only with expand=user (lists): the user, or null when the key may not see it. */
  user?: User | null;
}
