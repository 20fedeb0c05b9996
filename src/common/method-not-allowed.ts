import { HttpStatus } from '@nestjs/common';
import type { Request } from 'express';
import { METHODS } from 'node:http';
import { ApiError } from './api-error';
import { labelRoute } from './route-label';

/** The order methods are listed in an `Allow` header. */
const METHOD_ORDER = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/**
 * What svc reads of Express's router (express 5, router 2.3, whose `match` keeps no state on the
 * layer): its layers and their routes. If an upgrade moves them, method-not-allowed.e2e-spec.ts
 * fails (every 405 would turn back into a 404).
 */
interface RouterLayer {
  route?: { path: unknown; methods: Record<string, boolean | undefined> };
  match(path: string): unknown;
}
interface ExpressApp {
  router?: { stack?: RouterLayer[] };
}

/** One route as Express holds it: its path pattern and the methods it answers. */
export interface RegisteredRoute {
  path: string;
  /** Upper case, in `Allow` order; GET brings HEAD, as Express answers HEAD with the GET route. */
  methods: string[];
  matches(path: string): boolean;
}

function inAllowOrder(methods: Iterable<string>): string[] {
  const set = new Set(methods);
  if (set.has('GET')) {
    set.add('HEAD');
  }
  const known = METHOD_ORDER.filter((method) => set.has(method));
  return [...known, ...[...set].filter((method) => !METHOD_ORDER.includes(method)).sort()];
}

/**
 * The routes of an Express application after Nest registered them (`HttpAdapterHost`'s
 * instance), in registration order. A route for every method (`@All`: a catch-all, or a route
 * that answers other methods itself) is left out: it never needs a 405 and allows nothing in
 * particular.
 */
export function registeredRoutes(expressApp: unknown): RegisteredRoute[] {
  const stack = (expressApp as ExpressApp | undefined)?.router?.stack ?? [];
  const routes: RegisteredRoute[] = [];
  for (const layer of stack) {
    const route = layer.route;
    // Express 5 registers `all` as every method Node knows, one by one.
    if (!route || METHODS.every((method) => route.methods[method.toLowerCase()])) {
      continue;
    }
    routes.push({
      path: String(route.path),
      methods: inAllowOrder(
        Object.keys(route.methods)
          .filter((method) => route.methods[method])
          .map((method) => method.toUpperCase()),
      ),
      // Express's own matcher: the same parameters, wildcards, case and trailing slash rules.
      matches: (path) => Boolean(layer.match(path)),
    });
  }
  return routes;
}

/**
 * The methods the routes that match `path` answer, in `Allow` order; empty when none matches.
 */
export function allowedMethods(routes: RegisteredRoute[], path: string): string[] {
  return inAllowOrder(
    routes.filter((route) => route.matches(path)).flatMap((route) => route.methods),
  );
}

/** 405 with the Allow header listing what the resource does support. */
export function methodNotAllowed(req: Request, allowed: string[]): ApiError {
  return new ApiError(
    HttpStatus.METHOD_NOT_ALLOWED,
    `${req.method} is not allowed on ${req.path}; allowed: ${allowed.join(', ')}.`,
    { Allow: allowed.join(', ') },
  );
}

/**
 * The 405 for a request that no route took, when its path is a resource served with other
 * methods; undefined when the path is unknown or a route does take its method. Express passes a
 * request over every route that does not take its method, so such a request ends where no route
 * took it (the REST catch-all, Nest's not-found handler): the exception filter asks here.
 */
export function methodNotAllowedFor(routes: RegisteredRoute[], req: Request): ApiError | undefined {
  const allowed = allowedMethods(routes, req.path);
  if (allowed.length === 0 || allowed.includes(req.method.toUpperCase())) {
    return undefined;
  }
  // The request is counted under the resource (its first route's pattern), not the catch-all.
  const resource = routes.find((route) => route.matches(req.path));
  if (resource) {
    labelRoute(req, resource.path);
  }
  return methodNotAllowed(req, allowed);
}
