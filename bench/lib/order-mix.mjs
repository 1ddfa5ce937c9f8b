// The orders every POST /v1/orders load places. A mix is { userId, itemIds, maxLines }: order n
// has n % maxLines + 1 lines of quantity 1 on the next items in turn, so consecutive orders touch
// distinct items and every item is ordered alike. orderBodies and orderScript are the same rule,
// in JavaScript (setting up, autocannon) and in Lua (wrk); change them together.

// Orders cycle over this many items, each stocked so that no load this long can exhaust it:
// a 409 insufficient-stock would measure the refusal path, not placing orders.
export const ORDERED_ITEMS = 200;
export const STOCK_PER_ITEM = 10_000_000;

/** The order mix, as a generator of request bodies. */
export function orderBodies({ userId, itemIds, maxLines }) {
  let count = 0;
  let cursor = 0;
  return () => {
    count += 1;
    const lines = Array.from({ length: (count % maxLines) + 1 }, () => ({
      item_id: itemIds[cursor++ % itemIds.length],
      quantity: 1,
    }));
    return JSON.stringify({ name: `Bench order ${count}`, user_id: userId, lines });
  };
}

/** wrk calls request() for every request it sends, so each POST carries the next order of the mix. */
export function orderScript({ userId, itemIds, maxLines }, threads) {
  const stride = Math.floor(itemIds.length / threads);
  return `
local items = {${itemIds.join(',')}}
local count, cursor, threads = 0, 0, 0

-- Each wrk thread starts elsewhere in the items, so threads do not order the same items in step.
function setup(thread)
  thread:set('first', threads * ${stride})
  threads = threads + 1
end

function init()
  cursor = first or 0
end

function request()
  count = count + 1
  local lines = {}
  for k = 1, count % ${maxLines} + 1 do
    lines[k] = string.format('{"item_id":%d,"quantity":1}', items[cursor % #items + 1])
    cursor = cursor + 1
  end
  return wrk.format(nil, nil, nil, string.format('{"name":"Bench order %d","user_id":${userId},"lines":[%s]}', count, table.concat(lines, ',')))
end
`;
}
