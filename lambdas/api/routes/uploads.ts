/** POST /uploads: a presigned PUT URL for a bundle too large to send inline. */
import { uploadKey } from '../../domain/workspace-layout';
import type { ApiPlane } from '../plane';
import { type ApiRequest, type ApiResponse, jsonBody, type Route, requireTeam } from '../router';
import { noQuerySchema, parseRequest, uploadRequestSchema } from '../schemas';

/** How long an upload URL stays valid, seconds. */
export const UPLOAD_URL_SECONDS = 900;

/** Routes of uploads. */
export function uploadRoutes(plane: ApiPlane): Route[] {
  return [{ method: 'POST', path: '/uploads', handler: (r) => createUpload(plane, r) }];
}

async function createUpload(plane: ApiPlane, request: ApiRequest): Promise<ApiResponse> {
  const team = requireTeam(request.caller);
  parseRequest(noQuerySchema, request.query, 'query');
  parseRequest(uploadRequestSchema, jsonBody(request), 'body');
  const uploadId = plane.newId();
  const url = await plane.workspace.presignUpload(uploadKey(team.id, uploadId), UPLOAD_URL_SECONDS);
  const expiresAt = new Date(plane.clock().getTime() + UPLOAD_URL_SECONDS * 1000).toISOString();
  return {
    status: 201,
    body: {
      uploadId,
      url,
      method: 'PUT',
      headers: { 'Content-Type': 'application/gzip' },
      expiresAt,
      maxBytes: plane.config.limits.maxBundleMiB * 1024 * 1024,
    },
  };
}
