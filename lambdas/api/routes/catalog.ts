/** GET /tiers and POST /estimate: what can run where, and what a workload would cost before it is submitted. */
import { maxRuntimeSeconds } from '../../../lib/config';
import { jobScopes, periodOf } from '../../domain/budgets';
import { tierSpotView } from '../../domain/tier-spot';
import { keepsTierSpotRecord, TIER_SPOT_CHECK_INTERVAL_SECONDS } from '../../domain/watch';
import { textFilesOf } from '../../shared/tarball';
import { resolveBundle } from '../bundle';
import type { ApiPlane } from '../plane';
import { type ApiRequest, type ApiResponse, type Route, requiredJsonBody, requireTeam } from '../router';
import { estimateRequestSchema, noQuerySchema, parseRequest } from '../schemas';
import { assessWorkload, priceOf, tiersOf } from '../workload';

/** Routes of the tier catalog and estimates. */
export function catalogRoutes(plane: ApiPlane): Route[] {
  return [
    { method: 'GET', path: '/tiers', handler: (r) => listTiers(plane, r) },
    { method: 'POST', path: '/estimate', handler: (r) => estimate(plane, r) },
  ];
}

async function listTiers(plane: ApiPlane, request: ApiRequest): Promise<ApiResponse> {
  parseRequest(noQuerySchema, request.query, 'query');
  const team = requireTeam(request.caller);
  const allowed = new Set(tiersOf(plane.config, team).map((t) => t.id));
  const nowMs = plane.clock().getTime();
  const tiers = await Promise.all(
    plane.config.tiers.map(async (tier) => ({
      id: tier.id,
      kind: tier.kind,
      allowed: allowed.has(tier.id),
      instanceTypes: tier.instanceTypes,
      gpus: tier.gpus,
      gpuMemoryGiB: tier.gpuMemoryGiB,
      vcpus: tier.vcpus,
      memoryMiB: tier.memoryMiB,
      nodes: tier.nodes,
      maxRuntimeSeconds: maxRuntimeSeconds(tier),
      spotAllowed: tier.spotAllowed,
      price: await priceOf(plane.spotQuotes, tier),
      // What budget-watch's probe says of spot capacity now; null where it keeps no record (ADR 0001).
      spotCapacity: keepsTierSpotRecord(tier)
        ? tierSpotView(await plane.jobs.getTierSpot(tier.id), nowMs, TIER_SPOT_CHECK_INTERVAL_SECONDS)
        : null,
    })),
  );
  return { status: 200, body: { tiers } };
}

async function estimate(plane: ApiPlane, request: ApiRequest): Promise<ApiResponse> {
  const team = requireTeam(request.caller);
  parseRequest(noQuerySchema, request.query, 'query');
  const body = parseRequest(estimateRequestSchema, requiredJsonBody(request), 'body');
  const files =
    body.files ??
    textFilesOf((await resolveBundle(plane, team.id, { bundle: body.bundle, uploadId: body.uploadId })).files);
  const assessment = await assessWorkload(plane, team, {
    files,
    command: body.command,
    ...(body.requirements && { requirements: body.requirements }),
  });
  // Whether the budgets the job would be charged to (the team's, the caller's, the project's when given) could hold
  // the reservation right now: read only (an estimate writes nothing); the tightest one is reported. The lifecycle's
  // cost gate decides for real when the job is submitted. A team budget not created yet this month would be created
  // from the configuration; a user or project scope without a budget is unlimited.
  const period = periodOf(plane.clock());
  const scopes = jobScopes({ team: team.id, user: request.caller.userName, project: body.project });
  const budgets = await Promise.all(
    scopes.map(async (scope, i) => {
      const usage = await plane.ledger.usage(scope, period);
      const teamDefault =
        i === 0 ? Math.round(team.monthlyBudgetUsd * plane.config.budgets.blockThreshold * 1e6) / 1e6 : undefined;
      const availableUsd = usage?.availableUsd ?? teamDefault;
      return availableUsd === undefined ? undefined : { scope, availableUsd };
    }),
  );
  const tightest = budgets
    .filter((b): b is { scope: string; availableUsd: number } => b !== undefined)
    .reduce((least, b) => (b.availableUsd < least.availableUsd ? b : least));
  const { scope, availableUsd } = tightest;
  return {
    status: 200,
    body: {
      tier: assessment.tier.id,
      analysis: assessment.analysis,
      price: assessment.price,
      prices: await Promise.all(tiersOf(plane.config, team).map((t) => priceOf(plane.spotQuotes, t))),
      runtime: assessment.runtime,
      estimate: assessment.estimate,
      budget: {
        scope,
        period,
        availableUsd,
        reservationUsd: assessment.estimate.reservationUsd,
        fits: assessment.estimate.reservationUsd <= availableUsd,
      },
    },
  };
}
