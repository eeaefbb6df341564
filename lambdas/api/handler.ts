/** Lambda entry of the HTTP API (routes in app.ts). */
import { awsControlPlane } from '../shared/aws-control-plane';
import { createApiHandler } from './app';

/** API Gateway HTTP API (payload 2.0) handler. */
export const handler = createApiHandler(awsControlPlane());
