/**
 * The API handler: API Gateway HTTP API (payload format 2.0, IAM authorization) events in, JSON out. It resolves the
 * caller (principal → team, admin), routes, and maps every error to `{ "error": { code, message, details? } }`
 * with the right status; unexpected errors become a generic 500 (logged, never echoed).
 */
import type { APIGatewayProxyEventV2WithIAMAuthorizer, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { logger } from '../shared/logger';
import { resolveCaller } from './caller';
import { toErrorResponse } from './errors';
import type { ApiPlane } from './plane';
import { type ApiRequest, type ApiResponse, type Route, resolveRoute } from './router';
import { artifactRoutes } from './routes/artifacts';
import { budgetRoutes } from './routes/budgets';
import { catalogRoutes } from './routes/catalog';
import { jobRoutes } from './routes/jobs';
import { meRoutes } from './routes/me';
import { reportRoutes } from './routes/reports';
import { uploadRoutes } from './routes/uploads';

/** Every route of the API; the CDK construct declares the same method/path pairs (lib/api/http-api.ts). */
export function apiRoutes(plane: ApiPlane): Route[] {
  return [
    ...meRoutes(plane),
    ...catalogRoutes(plane),
    ...budgetRoutes(plane),
    ...uploadRoutes(plane),
    ...jobRoutes(plane),
    ...artifactRoutes(plane),
    ...reportRoutes(plane),
  ];
}

/** The event shape the handler accepts (HTTP API payload 2.0 with an IAM authorizer). */
export type ApiEvent = APIGatewayProxyEventV2WithIAMAuthorizer;

function lowerCaseHeaders(headers: Record<string, string | undefined> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {})) if (value !== undefined) out[name.toLowerCase()] = value;
  return out;
}

function definedValues(record: Record<string, string | undefined> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(record ?? {})) if (value !== undefined) out[name] = value;
  return out;
}

function reply(response: ApiResponse): APIGatewayProxyStructuredResultV2 {
  return {
    statusCode: response.status,
    headers: { 'content-type': 'application/json', ...response.headers },
    body: JSON.stringify(response.body),
  };
}

/**
 * Builds the handler. The plane's parts are taken here, once, so on Lambda a missing environment variable fails at
 * cold start with its name rather than on the first request that needs it.
 */
export function createApiHandler(source: ApiPlane): (event: ApiEvent) => Promise<APIGatewayProxyStructuredResultV2> {
  const plane: ApiPlane = {
    config: source.config,
    jobs: source.jobs,
    ledger: source.ledger,
    workspace: source.workspace,
    batch: source.batch,
    events: source.events,
    lifecycle: source.lifecycle,
    logs: source.logs,
    spotQuotes: source.spotQuotes,
    batchPrefix: source.batchPrefix,
    clock: source.clock,
    newId: source.newId,
  };
  const routes = apiRoutes(plane);
  return async (event) => {
    const method = event.requestContext?.http?.method ?? 'GET';
    const path = event.rawPath ?? event.requestContext?.http?.path ?? '/';
    try {
      const caller = resolveCaller(plane.config, event.requestContext?.authorizer?.iam?.userArn);
      const { route, params } = resolveRoute(routes, method, path);
      const request: ApiRequest = {
        method,
        path,
        params,
        query: definedValues(event.queryStringParameters),
        headers: lowerCaseHeaders(event.headers),
        ...(event.body !== undefined && {
          body: event.isBase64Encoded ? Buffer.from(event.body, 'base64').toString('utf8') : event.body,
        }),
        caller,
      };
      const response = await route.handler(request);
      logger.info('request', { method, route: route.path, status: response.status, team: caller.team?.id });
      return reply(response);
    } catch (error) {
      const { status, body } = toErrorResponse(error);
      logger.info('request refused', { method, path, status, code: body.error.code });
      return reply({ status, body });
    }
  };
}
