/** Who is calling: from the IAM principal API Gateway authenticated to a Trainyard team and admin flag. */
import { isAdmin, type TrainyardConfig, teamForPrincipal } from '../../lib/config';
import { forbidden } from './errors';
import type { Caller } from './router';

/** What the refusal of a caller in no team says (the CLI tells it from a refusal of what was asked by this). */
export const NOT_A_MEMBER = 'is not a member of any Trainyard team';

/**
 * The caller behind a principal ARN. A principal that is neither in a team nor an admin is refused with 403 on every
 * route, so an unknown account learns nothing about what exists.
 */
export function resolveCaller(config: TrainyardConfig, arn: string | undefined): Caller {
  if (!arn) throw forbidden('the request carries no IAM principal; sign it with SigV4 (IAM authorization)');
  const team = teamForPrincipal(config, arn);
  const admin = isAdmin(config, arn);
  if (!team && !admin) {
    throw forbidden(`principal ${arn} ${NOT_A_MEMBER}; ask an admin to add it to the config`);
  }
  return { arn, ...(team && { team }), admin, userName: userNameOf(arn) };
}

/**
 * A user id usable in budget scopes (`user:<team>/<id>`): the session name of an assumed role, else the user or role
 * name, lower-cased, with characters outside a-z 0-9 . _ - replaced by '-' and runs of dots by one (a scope never holds
 * '..'). `alice@example.com` → `alice-example.com`, `J..Doe` → `j.doe`.
 */
export function userNameOf(arn: string): string {
  const assumed = /:assumed-role\/[^/]+\/([^/]+)$/.exec(arn)?.[1];
  const named = /:(?:user|role)\/(?:.*\/)?([^/]+)$/.exec(arn)?.[1];
  const raw = (assumed ?? named ?? arn).toLowerCase();
  const safe = raw
    .replace(/[^a-z0-9._-]/g, '-')
    .replace(/\.{2,}/g, '.') // '..' is never in a budget scope
    .replace(/^[^a-z0-9]+/, '')
    .slice(0, 64);
  return safe.length > 0 ? safe : 'unknown';
}
