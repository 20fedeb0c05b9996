import type { Request } from 'express';
import { METHODS } from 'node:http';

/** The label of requests that no resource took: unknown paths share one value. */
export const UNMATCHED_ROUTE = 'unmatched';

/** Labels given by the code that answered instead of the route that ran (see routeLabelOf). */
const labels = new WeakMap<Request, string>();

/**
 * Names the route a request is counted under when the route Express ran is not the resource's:
 * a 405 names the resource whose methods it lists.
 */
export function labelRoute(req: Request, route: string): void {
  labels.set(req, route);
}

/**
 * The route pattern a request is counted under (`/svc/api/rest/results/:app`, not the concrete
 * path, so label values stay few): a label given by labelRoute, else the pattern of the route
 * Express ran, else UNMATCHED_ROUTE. A wildcard route for every method is a catch-all (the
 * request middleware's `/*path`, the REST 404), which a request ends on only when no resource
 * took it.
 */
export function routeLabelOf(req: Request): string {
  const label = labels.get(req);
  if (label !== undefined) {
    return label;
  }
  const route = req.route as
    { path?: unknown; methods?: Record<string, boolean | undefined> } | undefined;
  if (typeof route?.path !== 'string') {
    return UNMATCHED_ROUTE;
  }
  // Express 5 registers `all` as every method Node knows, one by one.
  const methods = route.methods ?? {};
  return route.path.includes('*') && METHODS.every((method) => methods[method.toLowerCase()])
    ? UNMATCHED_ROUTE
    : `${req.baseUrl}${route.path}`;
}
