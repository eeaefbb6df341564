// GET /me, GET/PUT /budgets, GET /tiers, POST /estimate and the router's own answers (404, 405, 500) against real engines.
// Expected figures are worked out here from the test config (seed tier prices), not taken from the code.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { userNameOf } from '../../../lambdas/api/caller';
import { INTERNAL_MESSAGE } from '../../../lambdas/api/errors';
import { analyzeWorkload } from '../../../lambdas/domain/analysis';
import { ConcurrentUpdate } from '../../../lambdas/domain/budgets';
import { parseConfig } from '../../../lib/config';
import {
  type ApiBench,
  errorOf,
  PRINCIPALS,
  projectBundle,
  projectFiles,
  startApiBench,
  TEST_CONFIG_INPUT,
} from './support';

const AUDIO = 'arn:aws:iam::123456789012:role/audio-researchers';
/** An admin who is also a member of audio. */
const AUDIO_LEAD = 'arn:aws:iam::123456789012:role/audio-lead';
let bench: ApiBench;
beforeAll(async () => {
  bench = await startApiBench({
    ...TEST_CONFIG_INPUT,
    teams: [...TEST_CONFIG_INPUT.teams, { id: 'audio', principals: [AUDIO, AUDIO_LEAD], monthlyBudgetUsd: 50 }],
    admins: [...TEST_CONFIG_INPUT.admins, AUDIO_LEAD],
  });
});
afterAll(async () => {
  await bench?.stop();
});

interface Usage {
  scope: string;
  period: string;
  limitUsd: number;
  spentUsd: number;
  reservedUsd: number;
  availableUsd: number;
  percentUsed: number | null;
  thresholdsCrossed: string[];
}

describe('GET /me', () => {
  it("names the caller's team, user and the scopes a job of theirs is charged to, and reads and writes nothing", async () => {
    const before = await bench.snapshot();
    const { status, body } = await bench.call({ method: 'GET', path: '/me', as: PRINCIPALS.nlpSession });
    expect(status).toBe(200);
    expect(body).toEqual({
      principal: PRINCIPALS.nlpSession,
      team: 'nlp',
      admin: false,
      // The session name, lower-cased, '@' made '-': the user scope its jobs meet.
      user: 'alice.smith-example.com',
      chargedTo: ['team:nlp', 'user:nlp/alice.smith-example.com'],
      // nlp lists no tiers, so it may use every tier of the config.
      tiers: parseConfig(TEST_CONFIG_INPUT, 'test').tiers.map((tier) => tier.id),
    });
    expect(await bench.snapshot()).toEqual(before);
  });

  it('gives a team that lists its tiers only those, and an admin in no team no team, scopes or tiers', async () => {
    const vision = await bench.call({ method: 'GET', path: '/me', as: PRINCIPALS.vision });
    expect(vision.body).toMatchObject({ team: 'vision', admin: false, tiers: ['cpu-small', 'gpu-small'] });
    const admin = await bench.call({ method: 'GET', path: '/me', as: PRINCIPALS.admin });
    expect(admin.body).toEqual({
      principal: PRINCIPALS.admin,
      team: null,
      admin: true,
      user: 'platform-admin',
      chargedTo: [],
      tiers: [],
    });
    // An admin in a team is that team's member too: its jobs are charged to the team like anyone's.
    const lead = await bench.call({ method: 'GET', path: '/me', as: AUDIO_LEAD });
    expect(lead.body).toMatchObject({ team: 'audio', admin: true, chargedTo: ['team:audio', 'user:audio/audio-lead'] });
  });

  it('refuses a principal in no team, naming it, and a query parameter', async () => {
    const stranger = await bench.call({ method: 'GET', path: '/me', as: PRINCIPALS.stranger });
    expect(stranger.status).toBe(403);
    expect(errorOf(stranger.body).message).toBe(
      `principal ${PRINCIPALS.stranger} is not a member of any Trainyard team; ask an admin to add it to the config`,
    );
    const query = await bench.call({ method: 'GET', path: '/me', query: { team: 'vision' } });
    expect(query.status).toBe(400);
    expect(errorOf(query.body).message).toBe('query: unknown field(s) "team"');
  });
});

describe('GET /budgets', () => {
  it("creates the team's budget for the month from the config on first sight, then only reads it", async () => {
    const first = await bench.call({ method: 'GET', path: '/budgets', as: PRINCIPALS.vision });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ team: 'vision', period: '2026-03' });
    expect(first.body.budgets).toEqual([
      expect.objectContaining({
        scope: 'team:vision',
        period: '2026-03',
        limitUsd: 400,
        spentUsd: 0,
        reservedUsd: 0,
        availableUsd: 400,
        percentUsed: 0,
        thresholdsCrossed: [],
      }),
    ]);
    const before = await bench.snapshot();
    const second = await bench.call({ method: 'GET', path: '/budgets', as: PRINCIPALS.vision });
    expect(second.body.budgets).toEqual(first.body.budgets);
    expect(await bench.snapshot()).toEqual(before);
  });

  it("shows an admin any team's budgets, opening this month's team scope as the team's own read would", async () => {
    const { status, body } = await bench.call({
      method: 'GET',
      path: '/budgets',
      query: { team: 'audio' },
      as: PRINCIPALS.admin,
    });
    expect(status).toBe(200);
    expect(body).toEqual({
      team: 'audio',
      period: '2026-03',
      budgets: [expect.objectContaining({ scope: 'team:audio', limitUsd: 50, spentUsd: 0, availableUsd: 50 })],
    });
    // A member naming its own team reads what its plain read shows.
    const own = await bench.call({ method: 'GET', path: '/budgets', query: { team: 'audio' }, as: AUDIO });
    expect(own.body).toEqual(body);
    expect((await bench.call({ method: 'GET', path: '/budgets', as: AUDIO })).body).toEqual(body);
  });

  it('reads another month as it stands: a read opens no team scope outside the current month', async () => {
    const set = await bench.call({
      method: 'PUT',
      path: '/budgets/user:vision/bo',
      as: PRINCIPALS.admin,
      body: { limitUsd: 12, period: '2026-02' },
    });
    expect(set.status).toBe(200);
    const before = await bench.snapshot();
    const past = await bench.call({
      method: 'GET',
      path: '/budgets',
      query: { period: '2026-02' },
      as: PRINCIPALS.vision,
    });
    expect(past.body).toEqual({
      team: 'vision',
      period: '2026-02',
      budgets: [
        expect.objectContaining({ scope: 'user:vision/bo', period: '2026-02', limitUsd: 12, availableUsd: 12 }),
      ],
    });
    const later = await bench.call({
      method: 'GET',
      path: '/budgets',
      query: { period: '2026-05', team: 'vision' },
      as: PRINCIPALS.admin,
    });
    expect(later.body).toEqual({ team: 'vision', period: '2026-05', budgets: [] });
    expect(await bench.snapshot()).toEqual(before);
  });

  it.each<{ name: string; as: string; query: Record<string, string>; status: number; message: string }>([
    {
      name: 'a member naming another team',
      as: PRINCIPALS.nlp,
      query: { team: 'vision' },
      status: 403,
      message: `principal ${PRINCIPALS.nlp} may see team nlp's budgets only, not vision's`,
    },
    {
      name: 'an admin outside any team naming none',
      as: PRINCIPALS.admin,
      query: {},
      status: 400,
      message: `principal ${PRINCIPALS.admin} is an admin outside any team: name the team with ?team=; teams: nlp, vision, audio`,
    },
    {
      name: 'a team that is not configured',
      as: PRINCIPALS.admin,
      query: { team: 'ghost' },
      status: 400,
      message: 'team "ghost" is not configured; teams: nlp, vision, audio',
    },
    {
      name: 'a team id of the wrong shape',
      as: PRINCIPALS.admin,
      query: { team: 'NLP' },
      status: 400,
      message: "query.team: must be a team id: 2-32 characters of a-z, 0-9 and '-', starting with a letter",
    },
    {
      name: 'a period that is not a month',
      as: PRINCIPALS.nlp,
      query: { period: '2026-3' },
      status: 400,
      message: 'query.period: must be a calendar month like 2026-01 (YYYY-MM, year 1000 or later)',
    },
    {
      name: 'a month before the year 1000, which no budget period covers',
      as: PRINCIPALS.nlp,
      query: { period: '0999-04' },
      status: 400,
      message: 'query.period: must be a calendar month like 2026-01 (YYYY-MM, year 1000 or later)',
    },
    {
      name: 'an unknown parameter',
      as: PRINCIPALS.nlp,
      query: { month: '2026-03' },
      status: 400,
      message: 'query: unknown field(s) "month"',
    },
  ])('refuses $name with $status and writes nothing', async (c) => {
    const before = await bench.snapshot();
    const { status, body } = await bench.call({ method: 'GET', path: '/budgets', query: c.query, as: c.as });
    expect(status).toBe(c.status);
    expect(errorOf(body).message).toBe(c.message);
    expect(await bench.snapshot()).toEqual(before);
  });
});

describe('PUT /budgets/{scope}', () => {
  it('lets an admin raise a team budget; the team then sees the new limit', async () => {
    const { status, body } = await bench.call({
      method: 'PUT',
      path: '/budgets/team:nlp',
      as: PRINCIPALS.admin,
      body: { limitUsd: 1500 },
    });
    expect(status).toBe(200);
    expect(body.budget).toMatchObject({ scope: 'team:nlp', period: '2026-03', limitUsd: 1500, availableUsd: 1500 });
    const seen = await bench.call({ method: 'GET', path: '/budgets', as: PRINCIPALS.nlp });
    expect((seen.body.budgets as Usage[]).find((b) => b.scope === 'team:nlp')?.limitUsd).toBe(1500);
  });

  it('takes user and project scopes with the slash raw or percent-encoded, and an explicit period', async () => {
    const raw = await bench.call({
      method: 'PUT',
      path: '/budgets/user:nlp/alice',
      as: PRINCIPALS.admin,
      body: { limitUsd: 25.5 },
    });
    const encoded = await bench.call({
      method: 'PUT',
      path: '/budgets/project%3Anlp%2Fgpt-small',
      as: PRINCIPALS.admin,
      body: { limitUsd: 80, period: '2026-04' },
    });
    expect([raw.status, encoded.status]).toEqual([200, 200]);
    expect(raw.body.budget).toMatchObject({ scope: 'user:nlp/alice', period: '2026-03', limitUsd: 25.5 });
    expect(encoded.body.budget).toMatchObject({ scope: 'project:nlp/gpt-small', period: '2026-04', limitUsd: 80 });
    const nlp = await bench.call({ method: 'GET', path: '/budgets', as: PRINCIPALS.nlp });
    expect((nlp.body.budgets as Usage[]).map((b) => b.scope)).toEqual(['team:nlp', 'user:nlp/alice']);
    // Another team never sees them.
    const vision = await bench.call({ method: 'GET', path: '/budgets', as: PRINCIPALS.vision });
    expect((vision.body.budgets as Usage[]).map((b) => b.scope)).toEqual(['team:vision']);
  });

  it('alerts on the thresholds a lower limit crosses, once each, as a reservation crossing them would', async () => {
    const put = (limitUsd: number) =>
      bench.call({ method: 'PUT', path: '/budgets/project:nlp/alerts', as: PRINCIPALS.admin, body: { limitUsd } });
    const crossed = () =>
      bench.recorded.published
        .filter((e) => e.DetailType === 'Budget Threshold Crossed')
        .map((e) => JSON.parse(e.Detail) as Record<string, unknown>)
        .filter((d) => d.scope === 'project:nlp/alerts');
    expect((await put(100)).body.crossings).toEqual([]);
    await bench.ledger.reserve('alerts-job', ['project:nlp/alerts'], 30, '2026-03');
    // $30 of $40 is 75 %: past warn (70 %), short of block (100 %).
    const warn = await put(40);
    expect(warn.body.crossings).toEqual([
      expect.objectContaining({ threshold: 'warn', limitUsd: 40, reservedUsd: 30 }),
    ]);
    // The budget it answers with is what a read now shows, crossing included.
    const read = await bench.call({ method: 'GET', path: '/budgets', as: PRINCIPALS.nlp });
    expect(warn.body.budget).toEqual((read.body.budgets as Usage[]).find((b) => b.scope === 'project:nlp/alerts'));
    expect(warn.body.budget).toMatchObject({ thresholdsCrossed: ['warn'], blocked: false });
    expect(crossed()).toEqual([
      expect.objectContaining({
        eventId: 'budget/project:nlp/alerts/2026-03/threshold/70',
        team: 'nlp',
        period: '2026-03',
        thresholdPercent: 70,
        limitUsd: 40,
        spentUsd: 0,
        reservedUsd: 30,
        occurredAt: bench.now.toISOString(),
      }),
    ]);
    // $30 of $20: block; warn was already sent this month.
    const block = await put(20);
    expect(block.body.crossings).toEqual([expect.objectContaining({ threshold: 'block', limitUsd: 20 })]);
    expect(block.body.budget).toMatchObject({ thresholdsCrossed: ['warn', 'block'], blocked: true });
    expect(crossed().map((d) => d.thresholdPercent)).toEqual([70, 100]);
    expect((await put(10)).body.crossings).toEqual([]);
    expect(crossed()).toHaveLength(2);
  });

  const refusals: Array<{
    name: string;
    path: string;
    as?: string;
    query?: Record<string, string>;
    body?: unknown;
    status: number;
    message: string;
  }> = [
    {
      name: 'a researcher (not an admin)',
      path: '/budgets/team:nlp',
      as: PRINCIPALS.nlp,
      body: { limitUsd: 1e6 },
      status: 403,
      message: `principal ${PRINCIPALS.nlp} is not a Trainyard admin; only admins may change budgets`,
    },
    {
      name: "a researcher naming another team's scope",
      path: '/budgets/team:vision',
      as: PRINCIPALS.nlp,
      body: { limitUsd: 0 },
      status: 403,
      message: `principal ${PRINCIPALS.nlp} is not a Trainyard admin; only admins may change budgets`,
    },
    {
      name: 'a key-separator escape',
      path: '/budgets/team:nlp%23PERIOD',
      body: { limitUsd: 10 },
      status: 400,
      message: `scope "team:nlp#PERIOD" contains '#', which separates DynamoDB key parts and is never allowed`,
    },
    {
      name: 'a path-traversal escape',
      path: '/budgets/user:nlp%2F..%2Fvision',
      body: { limitUsd: 10 },
      status: 400,
      message: `scope "user:nlp/../vision" contains '..'; path segments like '/..' are never allowed in a scope`,
    },
    {
      name: 'an unknown scope kind',
      path: '/budgets/org:nlp',
      body: { limitUsd: 10 },
      status: 400,
      message:
        'scope "org:nlp" has no known kind; scopes are team:<team>, user:<team>/<user> or project:<team>/<project>',
    },
    {
      name: 'a team that is not configured',
      path: '/budgets/team:ghost',
      body: { limitUsd: 10 },
      status: 400,
      message: 'scope team:ghost names team "ghost", which is not configured; teams: nlp, vision, audio',
    },
    {
      name: 'broken percent-encoding',
      path: '/budgets/team%3',
      body: { limitUsd: 10 },
      status: 400,
      message: 'path parameter scope is not valid percent-encoding: "team%3"',
    },
    {
      name: 'a negative limit',
      path: '/budgets/team:nlp',
      body: { limitUsd: -5 },
      status: 400,
      message: 'body.limitUsd: must not be negative',
    },
    {
      name: 'a limit finer than a cent, which would be stored rounded ($0 for 1e-7)',
      path: '/budgets/team:nlp',
      body: { limitUsd: 1e-7 },
      status: 400,
      message: 'body.limitUsd: must be whole cents, e.g. 250 or 12.5',
    },
    {
      name: 'a positive limit under a cent, which would be stored as $0',
      path: '/budgets/team:nlp',
      body: { limitUsd: 1e-9 },
      status: 400,
      message: 'body.limitUsd: must be whole cents, e.g. 250 or 12.5',
    },
    {
      name: 'a limit that is not a number',
      path: '/budgets/team:nlp',
      body: { limitUsd: 'NaN' },
      status: 400,
      message: 'body.limitUsd: must be a number of USD',
    },
    {
      name: 'an absurd limit',
      path: '/budgets/team:nlp',
      body: { limitUsd: 2e9 },
      status: 400,
      message: 'body.limitUsd: must be at most 1000000000',
    },
    {
      name: 'a period that is not a month',
      path: '/budgets/team:nlp',
      body: { limitUsd: 10, period: '2026-13' },
      status: 400,
      message: 'body.period: must be a calendar month like 2026-01 (YYYY-MM, year 1000 or later)',
    },
    {
      name: 'no body',
      path: '/budgets/team:nlp',
      status: 400,
      message: 'request body is required: a JSON object',
    },
    {
      name: 'an unknown query parameter (no dry run here)',
      path: '/budgets/team:nlp',
      query: { dryRun: '1' },
      body: { limitUsd: 999 },
      status: 400,
      message: 'query: unknown field(s) "dryRun"',
    },
  ];

  it.each(refusals)('refuses $name with $status and writes nothing', async (c) => {
    const before = await bench.snapshot();
    const { status, body } = await bench.call({
      method: 'PUT',
      path: c.path,
      as: c.as ?? PRINCIPALS.admin,
      ...(c.query !== undefined && { query: c.query }),
      ...(c.body !== undefined && { body: c.body }),
    });
    expect(status).toBe(c.status);
    expect(errorOf(body).message).toBe(c.message);
    expect(await bench.snapshot()).toEqual(before);
  });

  it('answers a limit that kept changing under it with 503 busy, to be retried', async () => {
    const spy = vi
      .spyOn(bench.ledger, 'setLimit')
      .mockRejectedValueOnce(
        new ConcurrentUpdate(
          'gave up setting the limit of team:nlp for 2026-03 after 8 attempts: the limit kept changing',
        ),
      );
    const { status, body } = await bench.call({
      method: 'PUT',
      path: '/budgets/team:nlp',
      as: PRINCIPALS.admin,
      body: { limitUsd: 900 },
    });
    spy.mockRestore();
    expect(status).toBe(503);
    expect(errorOf(body)).toEqual({
      code: 'busy',
      message: 'gave up setting the limit of team:nlp for 2026-03 after 8 attempts: the limit kept changing; retry it',
    });
  });
});

describe('GET /tiers', () => {
  it('prices spot from current quotes, falls back to config and marks the tiers the team may use', async () => {
    bench.quotes = [
      { instanceType: 'g4dn.xlarge', az: 'us-east-1a', usdPerHour: 0.21, timestamp: '2026-03-15T11:00:00.000Z' },
      { instanceType: 'g4dn.xlarge', az: 'us-east-1b', usdPerHour: 0.18, timestamp: '2026-03-15T11:30:00.000Z' },
    ];
    const { status, body } = await bench.call({ method: 'GET', path: '/tiers', as: PRINCIPALS.vision });
    bench.quotes = undefined;
    expect(status).toBe(200);
    const tiers = body.tiers as Array<{
      id: string;
      allowed: boolean;
      maxRuntimeSeconds: number;
      price: Record<string, unknown>;
    }>;
    expect(tiers.filter((t) => t.allowed).map((t) => t.id)).toEqual(['cpu-small', 'gpu-small']);
    const byId = new Map(tiers.map((t) => [t.id, t]));
    expect(byId.get('gpu-small')?.maxRuntimeSeconds).toBe(7200);
    expect(byId.get('gpu-small')?.price).toMatchObject({
      onDemandUsdPerHour: 0.526,
      spotUsdPerHour: 0.18,
      spotSource: 'ec2-spot-price-history',
      spotAz: 'us-east-1b',
    });
    expect(byId.get('gpu-medium')?.price).toMatchObject({ spotUsdPerHour: 0.27, spotSource: 'config-fallback' });
    expect(byId.get('gpu-multinode')?.price).toMatchObject({ spotSource: 'not-allowed' });
  });

  it("shows each watched tier's spot capacity from budget-watch's record, and null where it keeps none", async () => {
    // bench.now is 2026-03-15T12:00:00Z. gpu-small: spot back since 09:00, confirmed at 11:55; gpu-medium: out since
    // at least 2026-03-14T21:00 (the record began then), confirmed at 11:58; gpu-large: last confirmed at 11:48,
    // 12 minutes ago, more than 660 s: unknown.
    // gpu-small's record has counted 12 available stretches and 9 outages and was refitted on 2026-03-10; the others
    // were kept before the models (the fleet model, never fitted).
    const ms = (iso: string) => Date.parse(iso);
    const table = (first: number) => ({ atRisk: [first, ...new Array(23).fill(0)], ended: new Array(24).fill(0) });
    const hazards = new Array(24).fill(0.1);
    const records = [
      {
        tier: 'gpu-small',
        available: true,
        sinceMs: ms('2026-03-15T09:00:00Z'),
        sinceChange: true,
        seenMs: ms('2026-03-15T11:55:00Z'),
        lifeTable: { binSeconds: 600, available: table(12), unavailable: table(9) },
        modelFittedMs: ms('2026-03-10T00:00:00Z'),
        model: { binSeconds: 600, availableHazards: hazards, unavailableHazards: hazards },
      },
      {
        tier: 'gpu-medium',
        available: false,
        sinceMs: ms('2026-03-14T21:00:00Z'),
        sinceChange: false,
        seenMs: ms('2026-03-15T11:58:00Z'),
      },
      {
        tier: 'gpu-large',
        available: true,
        sinceMs: ms('2026-03-15T10:00:00Z'),
        sinceChange: true,
        seenMs: ms('2026-03-15T11:48:00Z'),
      },
    ];
    for (const record of records) await bench.jobs.updateTierSpot(record.tier, () => record);
    const before = await bench.snapshot();
    const { status, body } = await bench.call({ method: 'GET', path: '/tiers' });
    expect(status).toBe(200);
    const capacity = Object.fromEntries(
      (body.tiers as Array<{ id: string; spotCapacity: unknown }>).map((t) => [t.id, t.spotCapacity]),
    );
    // The CPU tiers run on Fargate with no instance types to probe; gpu-multinode does not allow spot.
    expect(capacity).toEqual({
      'cpu-small': null,
      'cpu-large': null,
      'gpu-small': {
        state: 'available',
        since: '2026-03-15T09:00:00.000Z',
        sinceSeen: true,
        checkedAt: '2026-03-15T11:55:00.000Z',
        model: {
          source: 'tier',
          fittedAt: '2026-03-10T00:00:00.000Z',
          stretchesCounted: { available: 12, unavailable: 9 },
        },
      },
      'gpu-medium': {
        state: 'unavailable',
        since: '2026-03-14T21:00:00.000Z',
        sinceSeen: false,
        checkedAt: '2026-03-15T11:58:00.000Z',
        model: { source: 'fleet', stretchesCounted: { available: 0, unavailable: 0 } },
      },
      'gpu-large': {
        state: 'unknown',
        checkedAt: '2026-03-15T11:48:00.000Z',
        model: { source: 'fleet', stretchesCounted: { available: 0, unavailable: 0 } },
      },
      'gpu-multinode': null,
    });
    expect(await bench.snapshot()).toEqual(before);
  });

  it('reports the config fallback when EC2 spot prices cannot be read', async () => {
    const { body } = await bench.call({ method: 'GET', path: '/tiers' });
    const gpuSmall = (body.tiers as Array<{ id: string; price: Record<string, unknown> }>).find(
      (t) => t.id === 'gpu-small',
    );
    expect(gpuSmall?.price).toMatchObject({
      spotUsdPerHour: 0.19,
      spotSource: 'config-fallback',
      note: 'EC2 spot price history is unavailable; using the configured spot price $0.19/h',
    });
  });
});

describe('POST /estimate', () => {
  const command = ['python', 'train.py'];
  /** An estimate of `runtimeSeconds` on gpu-multinode (2 nodes × $5.672/h) for the audio team's caller. */
  const estimateOnMultinode = (runtimeSeconds: number, extra: Record<string, unknown> = {}) =>
    bench.call({
      method: 'POST',
      path: '/estimate',
      as: AUDIO,
      body: {
        bundle: projectBundle('cpu-tiny').toString('base64'),
        command,
        requirements: { tier: 'gpu-multinode', runtimeSeconds },
        ...extra,
      },
    });

  it('analyses text files, prices the recommended tier and writes nothing', async () => {
    const before = await bench.snapshot();
    const files = projectFiles('cpu-tiny');
    const { status, body } = await bench.call({
      method: 'POST',
      path: '/estimate',
      as: AUDIO,
      body: { files, command },
    });
    expect(status).toBe(200);
    const expected = analyzeWorkload({ files, command }, bench.config.tiers);
    expect(body.tier).toBe(expected.recommendedTier);
    expect(body.analysis).toEqual(JSON.parse(JSON.stringify(expected)));
    expect(body.price).toMatchObject({ tier: expected.recommendedTier, spotSource: 'config-fallback' });
    expect((body.prices as unknown[]).length).toBe(6);
    expect(await bench.snapshot()).toEqual(before);
  });

  it.each([
    // 2 nodes × $5.672/h: 1 h → $11.344 → reserve $11.35 (fits $50); 5 h → $56.72 (does not).
    [3600, 11.35, true],
    [18000, 56.72, false],
  ])(
    'says whether the team budget ($50, none spent) holds the reservation for %i s on gpu-multinode',
    async (runtimeSeconds, reservation, fits) => {
      const { status, body } = await estimateOnMultinode(runtimeSeconds);
      expect(status).toBe(200);
      expect(body.tier).toBe('gpu-multinode');
      expect(body.budget).toEqual({
        scope: 'team:audio',
        period: '2026-03',
        availableUsd: 50,
        reservationUsd: reservation,
        fits,
      });
    },
  );

  it('reports the tightest budget the job would be charged to: the caller’s and the project’s, not only the team’s', async () => {
    // The team has $50; an admin capped this caller at $20 and the project "tight" at $5.
    const user = `user:audio/${userNameOf(AUDIO)}`;
    await bench.ledger.setLimit(user, '2026-03', 20);
    await bench.ledger.setLimit('project:audio/tight', '2026-03', 5);
    const estimate = async (extra: Record<string, unknown>) => (await estimateOnMultinode(3600, extra)).body;

    // 1 h on gpu-multinode reserves $11.35: the caller's $20 holds it; the project's $5 does not.
    expect((await estimate({})).budget).toEqual({
      scope: user,
      period: '2026-03',
      availableUsd: 20,
      reservationUsd: 11.35,
      fits: true,
    });
    expect((await estimate({ project: 'tight' })).budget).toMatchObject({
      scope: 'project:audio/tight',
      availableUsd: 5,
      fits: false,
    });
    // A project without a budget is unlimited: the caller's stays the tightest.
    expect((await estimate({ project: 'open' })).budget).toMatchObject({ scope: user, fits: true });
  });

  it('refuses a workload no tier can run with 422 and the analysis', async () => {
    const { status, body } = await bench.call({
      method: 'POST',
      path: '/estimate',
      body: { files: projectFiles('cpu-tiny'), command, requirements: { runtimeSeconds: 864000 } },
    });
    expect(status).toBe(422);
    expect(errorOf(body).code).toBe('workload_refused');
    expect(errorOf(body).message).toMatch(/^no tier fits this workload: /);
    expect(errorOf(body).details?.analysis).toMatchObject({ recommendationReason: 'no tier fits' });
  });

  it('needs exactly one source of code', async () => {
    const { status, body } = await bench.call({ method: 'POST', path: '/estimate', body: { command } });
    expect(status).toBe(400);
    expect(errorOf(body).message).toBe('body: one of bundle, uploadId, files is required');
  });
});

describe('the router', () => {
  it('answers an unknown path with 404 and a known path with another method with 405', async () => {
    const unknown = await bench.call({ method: 'GET', path: '/nope' });
    expect([unknown.status, errorOf(unknown.body).message]).toEqual([404, 'no route for GET /nope']);
    const wrong = await bench.call({ method: 'PATCH', path: '/jobs' });
    expect(wrong.status).toBe(405);
    expect(errorOf(wrong.body)).toEqual({
      code: 'method_not_allowed',
      message: 'PATCH is not allowed on /jobs; allowed: POST, GET',
      details: { allow: ['POST', 'GET'] },
    });
  });

  it('answers an unexpected failure with a generic 500 that leaks nothing', async () => {
    const spy = vi
      .spyOn(bench.jobs, 'listJobsByTeam')
      .mockRejectedValueOnce(new Error('ValidationException: table trainyard-jobs key schema secret-detail'));
    const { status, body } = await bench.call({ method: 'GET', path: '/jobs' });
    spy.mockRestore();
    expect(status).toBe(500);
    expect(body).toEqual({ error: { code: 'internal', message: INTERNAL_MESSAGE } });
    expect(JSON.stringify(body)).not.toContain('secret-detail');
  });
});
