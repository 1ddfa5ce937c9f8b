import { useEffect, useState } from 'preact/hooks';

/**
 * Where the console is, in the address's fragment (`/console#/webhooks/4?status=dead`): the
 * server serves one page, links can be shared and bookmarked, Back and Forward work.
 */
export interface Route {
  /** The path's segments: `['webhooks', '4']`. */
  parts: string[];
  params: URLSearchParams;
}

/** What a section's view is given: the route's segments after its own (`#/webhooks/4` → `['4']`) and its query. */
export interface ViewProps {
  parts: string[];
  params: URLSearchParams;
}

export function parseRoute(hash: string): Route {
  const text = hash.replace(/^#\/?/, '');
  const [path = '', search = ''] = text.split('?', 2);
  return {
    parts: path
      .split('/')
      .filter((part) => part !== '')
      .map(decodeURIComponent),
    params: new URLSearchParams(search),
  };
}

/** The link to a place in the console: `href('webhooks', 4)`, with optional query parameters. */
export function href(...parts: (string | number | Record<string, string | number | undefined>)[]): string {
  const last = parts.at(-1);
  const query = typeof last === 'object' ? (parts.pop() as Record<string, string | number | undefined>) : undefined;
  const path = `#/${parts.map((part) => encodeURIComponent(String(part))).join('/')}`;
  if (query === undefined) return path;
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(query))
    if (value !== undefined && value !== '') search.set(name, String(value));
  const text = search.toString();
  return text === '' ? path : `${path}?${text}`;
}

export function navigate(to: string): void {
  if (location.hash !== to) location.hash = to;
}

/** The current route; re-renders on every change of the fragment. */
export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const changed = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  return route;
}
