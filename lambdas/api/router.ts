/**
 * The API's small router: API Gateway HTTP API (payload format 2.0) events in, `{ status, body }` out. Routes are
 * declared as method + path template (`/jobs/{id}`, greedy `/budgets/{scope+}`); the router answers 404 for an
 * unknown path and 405 (with Allow) for a known path with another method, before any handler runs.
 */
import type { TeamConfig } from '../../lib/config';
import { ApiError, badRequest, forbidden } from './errors';

/** Who is calling: the IAM principal API Gateway authenticated, its team and whether it is an admin. */
export interface Caller {
  /** The principal ARN (`requestContext.authorizer.iam.userArn`). */
  readonly arn: string;
  /** The principal's team; undefined for an admin that belongs to no team. */
  readonly team?: TeamConfig;
  readonly admin: boolean;
  /** A budget-scope-safe user name derived from the ARN (session, user or role name), for `job.user`. */
  readonly userName: string;
}

/** One request as the route handlers see it. */
export interface ApiRequest {
  readonly method: string;
  readonly path: string;
  /** Path parameters from the route template, percent-decoded once. */
  readonly params: Readonly<Record<string, string>>;
  readonly query: Readonly<Record<string, string>>;
  /** Header names lower-cased. */
  readonly headers: Readonly<Record<string, string>>;
  /** The body as text (API Gateway's base64 encoding undone), or undefined. */
  readonly body?: string;
  readonly caller: Caller;
}

/** What a route handler returns. */
export interface ApiResponse {
  readonly status: number;
  readonly body: unknown;
  readonly headers?: Readonly<Record<string, string>>;
}

/** A route handler. */
export type RouteHandler = (request: ApiRequest) => Promise<ApiResponse>;

/** One route: method, path template and handler. */
export interface Route {
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** `/jobs/{id}/logs`; a last segment `{name+}` matches the rest of the path, slashes included. */
  readonly path: string;
  readonly handler: RouteHandler;
}

/** The team of the caller, or 403 when the principal belongs to none (an admin without a team, for example). */
export function requireTeam(caller: Caller): TeamConfig {
  if (!caller.team) throw forbidden(`principal ${caller.arn} is not a member of any Trainyard team`);
  return caller.team;
}

/**
 * The team a read looks at (`what`: "showback", "budgets"): the caller's own, or, for an admin, the configured team
 * that `named` names. A member naming another team gets 403; an admin outside any team must name one (400).
 */
export function teamInView(
  teams: readonly TeamConfig[],
  caller: Caller,
  named: string | undefined,
  what: string,
): TeamConfig {
  const known = () => teams.map((t) => t.id).join(', ');
  const own = caller.team;
  if (named === undefined || named === own?.id) {
    if (own === undefined) {
      throw badRequest(
        `principal ${caller.arn} is an admin outside any team: name the team with ?team=; teams: ${known()}`,
      );
    }
    return own;
  }
  if (!caller.admin) {
    throw forbidden(`principal ${caller.arn} may see team ${own?.id ?? '(none)'}'s ${what} only, not ${named}'s`);
  }
  const team = teams.find((t) => t.id === named);
  if (!team) throw badRequest(`team "${named}" is not configured; teams: ${known()}`);
  return team;
}

/** The body parsed as JSON; undefined when there is none. Malformed JSON is a 400 naming the parser's complaint. */
export function jsonBody(request: ApiRequest): unknown {
  if (request.body === undefined || request.body.trim() === '') return undefined;
  try {
    return JSON.parse(request.body);
  } catch (error) {
    throw new ApiError(400, 'invalid_json', `request body is not valid JSON: ${(error as Error).message}`);
  }
}

/** The body parsed as JSON, required to be present. */
export function requiredJsonBody(request: ApiRequest): unknown {
  const body = jsonBody(request);
  if (body === undefined) throw badRequest('request body is required: a JSON object');
  return body;
}

function decodeSegment(segment: string, name: string): string {
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    throw badRequest(`path parameter ${name} is not valid percent-encoding: ${JSON.stringify(segment)}`);
  }
}

/** Matches a path against a template; the parameters, or undefined when it does not match. */
export function matchPath(template: string, path: string): Record<string, string> | undefined {
  const want = template.split('/').filter(Boolean);
  const got = path.split('/').filter(Boolean);
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const part = want[i] as string;
    const greedy = /^\{(\w+)\+\}$/.exec(part);
    if (greedy?.[1] && i === want.length - 1) {
      if (got.length <= i) return undefined;
      params[greedy[1]] = decodeSegment(got.slice(i).join('/'), greedy[1]);
      return params;
    }
    const value = got[i];
    if (value === undefined) return undefined;
    const param = /^\{(\w+)\}$/.exec(part);
    if (param?.[1]) params[param[1]] = decodeSegment(value, param[1]);
    else if (part !== value) return undefined;
  }
  return got.length === want.length ? params : undefined;
}

/** Finds the route for a method and path: the handler and its parameters, or a 404/405 ApiError. */
export function resolveRoute(
  routes: readonly Route[],
  method: string,
  path: string,
): { route: Route; params: Record<string, string> } {
  const allowed: string[] = [];
  for (const route of routes) {
    const params = matchPath(route.path, path);
    if (!params) continue;
    if (route.method === method) return { route, params };
    allowed.push(route.method);
  }
  if (allowed.length > 0) {
    throw new ApiError(
      405,
      'method_not_allowed',
      `${method} is not allowed on ${path}; allowed: ${allowed.join(', ')}`,
      {
        allow: allowed,
      },
    );
  }
  throw new ApiError(404, 'route_not_found', `no route for ${method} ${path}`);
}
