import { AsyncLocalStorage } from "node:async_hooks";

/**
 * The REST route a piece of work is serving, carried through its awaits (AsyncLocalStorage): the
 * HTTP layer runs each request inside {@link runInRoute}; the node registry reads
 * {@link currentRoute} when an event it gets changes a node, so the flight recorder names the
 * route (source `rest`) without every service passing it along.
 */
const storage = new AsyncLocalStorage<string>();

/** Runs `fn` (and everything it starts) as serving `route` (`METHOD /pattern`). */
export function runInRoute(route: string, fn: () => void): void {
  storage.run(route, fn);
}

/** The route being served, or undefined outside a request. */
export function currentRoute(): string | undefined {
  return storage.getStore();
}
