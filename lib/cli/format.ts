/**
 * Human output of the CLI: money, durations, a progress bar, and the views of the API's answers (estimate, job
 * status, job list, budgets, checkpoints, logs). The API's JSON is read leniently (a missing field is left out of
 * the view, never invented), so a newer API with more fields still prints; `--json` prints the API's JSON itself.
 */
import { isTerminal } from '../../lambdas/domain/job';
import { type JobLabels, labelsText } from '../../lambdas/domain/labels';

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The value at a dotted path, or undefined. */
export function at(value: unknown, path: string): unknown {
  let current: unknown = value;
  for (const key of path.split('.')) {
    if (!isObject(current)) return undefined;
    current = current[key];
  }
  return current;
}

/** The finite number at a dotted path, or undefined. */
export function num(value: unknown, path: string): number | undefined {
  const v = at(value, path);
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

/** The non-empty string at a dotted path, or undefined. */
export function str(value: unknown, path: string): string | undefined {
  const v = at(value, path);
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** The array at a dotted path (or the value itself), else an empty one. */
export function list(value: unknown, path?: string): unknown[] {
  const v = path === undefined ? value : at(value, path);
  return Array.isArray(v) ? v : [];
}

/** Dollars for people: `$0.00`, `$0.0042` under a cent (2 significant digits), `$12.50`, `$1,234.56`, `-$3.00`. */
export function formatMoney(usd: number): string {
  if (!Number.isFinite(usd)) return '—';
  const sign = usd < 0 ? '-' : '';
  const abs = Math.abs(usd);
  if (abs > 0 && abs < 0.005) return `${sign}$${Number(abs.toPrecision(2))}`;
  const [whole = '0', cents = '00'] = abs.toFixed(2).split('.');
  return `${sign}$${whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',')}.${cents}`;
}

/** An hourly price: up to four decimals, no trailing zeros (`$0.526`, `$0.025`, `$1.5`) — cents would hide the tier differences. */
export function formatRate(usdPerHour: number): string {
  if (!Number.isFinite(usdPerHour)) return '—';
  return `$${Number(usdPerHour.toFixed(4))}`;
}

/** Seconds for people: `45s`, `12m 05s`, `3h 04m`, `2d 03h` (rounded to the second). */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '—';
  const s = Math.round(seconds);
  const pad = (n: number) => n.toString().padStart(2, '0');
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${pad(s % 60)}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${pad(Math.floor((s % 3600) / 60))}m`;
  return `${Math.floor(s / 86400)}d ${pad(Math.floor((s % 86400) / 3600))}h`;
}

/**
 * A tier's `spotCapacity` (GET /tiers) for the table: how long spot had been in its state at the watch's last check
 * (`≥` when the watch did not see it begin), `unknown` without a fresh record, `—` for a tier the watch does not probe.
 */
function formatSpotCapacity(capacity: unknown): string {
  const state = at(capacity, 'state');
  if (state !== 'available' && state !== 'unavailable') return state === 'unknown' ? 'unknown' : '—';
  const since = Date.parse(String(at(capacity, 'since')));
  const checked = Date.parse(String(at(capacity, 'checkedAt')));
  const label = state === 'available' ? 'available' : 'out';
  if (!Number.isFinite(since) || !Number.isFinite(checked)) return label;
  const atLeast = at(capacity, 'sinceSeen') === false ? '≥ ' : '';
  return `${label} for ${atLeast}${formatDuration((checked - since) / 1000)}`;
}

/**
 * The spot model a tier's `spotCapacity` says its deadline jobs are planned with: `tier (21 stretches)` when its record
 * has learnt its own (from that many counted stretches), `fleet` before, `—` for a tier without a record.
 */
function formatSpotModel(capacity: unknown): string {
  const source = at(capacity, 'model.source');
  if (source === 'fleet') return 'fleet';
  if (source !== 'tier') return '—';
  const counted =
    (num(capacity, 'model.stretchesCounted.available') ?? 0) +
    (num(capacity, 'model.stretchesCounted.unavailable') ?? 0);
  return `tier (${counted} stretches)`;
}

/**
 * `[########------------]  40%`: filled cells and percent are rounded down, so the bar reads full and 100 % only
 * when the work is done. Fractions outside 0..1 are clamped; NaN reads as 0.
 */
export function progressBar(fraction: number, width = 20): string {
  const f = Number.isFinite(fraction) ? Math.min(1, Math.max(0, fraction)) : 0;
  const filled = Math.floor(f * width + 1e-9);
  const percent = Math.floor(f * 100 + 1e-9);
  return `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${percent.toString().padStart(3, ' ')}%`;
}

function rows(pairs: ReadonlyArray<readonly [string, string | undefined]>): string[] {
  const present = pairs.filter((p): p is readonly [string, string] => p[1] !== undefined);
  const width = Math.max(0, ...present.map(([k]) => k.length));
  return present.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`);
}

function figure(value: unknown, path: string, show: (v: number) => string): string | undefined {
  const v = num(value, `${path}.value`);
  if (v === undefined) return undefined;
  const confidence = str(value, `${path}.confidence`);
  const basis = str(value, `${path}.basis`);
  return `${show(v)}${confidence ? ` (${confidence} confidence)` : ''}${basis ? ` — ${basis}` : ''}`;
}

function count(n: number): string {
  const units: Array<[number, string]> = [
    [1e12, 'T'],
    [1e9, 'B'],
    [1e6, 'M'],
    [1e3, 'k'],
  ];
  for (const [scale, suffix] of units) if (n >= scale) return `${Number((n / scale).toPrecision(3))}${suffix}`;
  return String(n);
}

/**
 * GET /me for people: who the platform takes the caller to be, and through which API.
 *
 * ```
 * Principal arn:aws:sts::123456789012:assumed-role/nlp-researchers/alice@example.com
 *   team        nlp
 *   admin       no
 *   user        alice-example.com
 *   charged to  team:nlp, user:nlp/alice-example.com (and project:nlp/<name> with submit --project)
 *   tiers       cpu-small, gpu-small
 *   API         local mode, http://127.0.0.1:8787/
 * ```
 */
export function formatMe(response: unknown, api: { kind: 'local' | 'remote'; url: string }): string {
  const team = str(response, 'team');
  const scopes = list(response, 'chargedTo').map(String);
  const tiers = list(response, 'tiers').map(String);
  return [
    `Principal ${str(response, 'principal') ?? '?'}`,
    ...rows([
      ['team', team ?? '— (an admin in no team: budgets, showback and whoami only)'],
      ['admin', at(response, 'admin') === true ? 'yes' : 'no'],
      ['user', str(response, 'user')],
      [
        'charged to',
        team === undefined ? undefined : `${scopes.join(', ')} (and project:${team}/<name> with submit --project)`,
      ],
      ['tiers', team === undefined ? undefined : tiers.length > 0 ? tiers.join(', ') : 'none'],
      ['API', api.kind === 'local' ? `local mode, ${api.url}` : api.url],
    ]),
  ].join('\n');
}

/** The tier an estimate response is about: explicit `tier`, the estimate's, or the analysis' recommendation. */
export function estimateTier(response: unknown): string | undefined {
  return (
    str(response, 'tier') ??
    str(response, 'estimate.tier') ??
    str(response, 'price.tier') ??
    str(response, 'analysis.recommendedTier')
  );
}

/**
 * The cost the confirmation threshold is compared with: the estimate's reservation (the conservative upper bound the
 * budget gate reserves), else the larger of on-demand and the spot high bound.
 */
export function estimateCostForConfirmation(response: unknown): number | undefined {
  const reservation = num(response, 'estimate.reservationUsd');
  if (reservation !== undefined) return reservation;
  const candidates = [num(response, 'estimate.onDemand.costUsd'), num(response, 'estimate.spot.highUsd')].filter(
    (v): v is number => v !== undefined,
  );
  return candidates.length ? Math.max(...candidates) : undefined;
}

/** The analysis and estimate (POST /estimate) for people. */
export function formatEstimate(response: unknown): string {
  const a = at(response, 'analysis');
  const e = at(response, 'estimate');
  const tier = estimateTier(response);
  const lines: string[] = ['Analysis'];
  const framework = str(a, 'framework');
  const gpu = at(a, 'usesGpu.value');
  const hyper = at(a, 'hyperparameters');
  const hyperText = isObject(hyper)
    ? Object.entries(hyper)
        .map(([k, v]) => `${k}=${String(at(v, 'value') ?? v)}`)
        .join(' ')
    : undefined;
  lines.push(
    ...rows([
      [
        'framework',
        framework ? `${framework}${typeof gpu === 'boolean' ? `, ${gpu ? 'uses GPU' : 'CPU only'}` : ''}` : undefined,
      ],
      ['hyper-params', hyperText || undefined],
      ['parameters', figure(a, 'parameterCount', count)],
      ['GPU memory', figure(a, 'peakGpuMemoryGiB', (v) => `${v.toFixed(1)} GiB`)],
      ['runtime', estimateRuntime(response)],
      [
        'tier',
        tier ? `${tier}${str(a, 'recommendationReason') ? ` — ${str(a, 'recommendationReason')}` : ''}` : undefined,
      ],
      ['alternatives', list(a, 'alternatives').length ? list(a, 'alternatives').join(', ') : undefined],
      ['overrides', list(a, 'overridesApplied').length ? list(a, 'overridesApplied').join('; ') : undefined],
      ['unknowns', list(a, 'unknowns').length ? list(a, 'unknowns').join('; ') : undefined],
    ]),
  );
  const nodes = num(e, 'nodes');
  lines.push('', `Estimate${tier ? ` on ${tier}` : ''}${nodes && nodes > 1 ? ` (${nodes} nodes)` : ''}`);
  const onDemandCost = num(e, 'onDemand.costUsd');
  const onDemandHours = num(e, 'onDemand.hours');
  const spotExpected = num(e, 'spot.expectedCostUsd');
  const spotLow = num(e, 'spot.lowUsd');
  const spotHigh = num(e, 'spot.highUsd');
  const interruptions = num(e, 'spot.expectedInterruptions');
  const spotHours = num(e, 'spot.expectedHours');
  lines.push(
    ...rows([
      [
        'on-demand',
        onDemandCost === undefined
          ? undefined
          : `${formatMoney(onDemandCost)}${onDemandHours === undefined ? '' : ` (${formatDuration(onDemandHours * 3600)})`}`,
      ],
      [
        'spot',
        spotExpected === undefined
          ? e !== undefined
            ? 'not available on this tier'
            : undefined
          : `${formatMoney(spotExpected)} expected${spotLow !== undefined && spotHigh !== undefined ? ` (${formatMoney(spotLow)}–${formatMoney(spotHigh)})` : ''}${spotHours === undefined ? '' : `, ${formatDuration(spotHours * 3600)}`}${interruptions === undefined ? '' : `, ${Number(interruptions.toPrecision(2))} interruptions expected`}`,
      ],
      [
        'recommendation',
        str(e, 'recommendation')
          ? `${str(e, 'recommendation')}${str(e, 'reasoning') ? ` — ${str(e, 'reasoning')}` : ''}`
          : undefined,
      ],
      [
        'reserve',
        num(e, 'reservationUsd') === undefined
          ? undefined
          : `${formatMoney(num(e, 'reservationUsd') ?? 0)} held against your budgets while it runs`,
      ],
      [
        'budget',
        num(response, 'budget.availableUsd') === undefined
          ? undefined
          : `${formatMoney(num(response, 'budget.availableUsd') ?? 0)} available in ${str(response, 'budget.scope') ?? 'your team'}${at(response, 'budget.fits') === false ? ' — NOT enough for this reservation: the job would be refused' : ''}`,
      ],
    ]),
  );
  return lines.join('\n');
}

function estimateRuntime(response: unknown): string | undefined {
  const seconds = num(response, 'estimate.runtimeSeconds');
  const tier = estimateTier(response);
  const perTier = list(response, 'analysis.perTier').find((t) => str(t, 'tier') === tier);
  const fig = perTier ? figure(perTier, 'runtimeSeconds', formatDuration) : undefined;
  if (fig) return fig;
  return seconds === undefined ? undefined : formatDuration(seconds);
}

/**
 * A sweep's jobs before they are submitted: each combination's parameters, the tier its estimate chose, its runtime
 * and what the budget gate will reserve for it (`estimates[i]` is job i's POST /estimate answer).
 */
export function formatSweepPlan(
  jobs: ReadonlyArray<{ index: number; params: Readonly<Record<string, string>> }>,
  estimates: readonly unknown[],
): string {
  const names = Object.keys(jobs[0]?.params ?? {});
  const table = [['#', ...names.map((n) => n.toUpperCase()), 'TIER', 'RUNTIME', 'RESERVES']];
  jobs.forEach((job, i) => {
    const estimate = estimates[i];
    const reservation = estimateCostForConfirmation(estimate);
    const runtime = num(estimate, 'estimate.runtimeSeconds') ?? num(estimate, 'runtime.value');
    table.push([
      String(job.index),
      ...names.map((n) => job.params[n] ?? ''),
      estimateTier(estimate) ?? '?',
      runtime === undefined ? '?' : formatDuration(runtime),
      reservation === undefined ? '?' : formatMoney(reservation),
    ]);
  });
  return alignTable(table);
}

/** The job record inside a GET /jobs/{id} (or POST /jobs, DELETE) answer: `job`, or the body itself. */
export function jobOf(response: unknown): Json {
  const job = at(response, 'job');
  if (isObject(job)) return job;
  return isObject(response) ? response : {};
}

/** The facts a status view shows, read from a GET /jobs/{id} answer. */
export interface JobView {
  readonly jobId?: string;
  readonly state?: string;
  readonly tier?: string;
  readonly attempts: number;
  readonly capacity?: string;
  readonly step?: number;
  readonly totalSteps?: number;
  readonly fraction?: number;
  readonly loss?: number;
  readonly etaSeconds?: number;
  readonly costSoFarUsd?: number;
  readonly projectedTotalUsd?: number;
  readonly reason?: string;
}

/**
 * Reads the status facts from a GET /jobs/{id} answer: `{ job, attempts, decisions, progress, forecast, costSoFarUsd }`
 * where `forecast` is `{ available: true, forecast }` or `{ available: false, reason }` and `progress` is the job's
 * record (camelCase) or the harness's progress.json (snake_case) while the record has none.
 */
export function jobView(response: unknown): JobView {
  const job = jobOf(response);
  const attempts = list(response, 'attempts');
  const last = attempts.at(-1);
  const progress = at(response, 'progress') ?? at(job, 'progress');
  const forecast = at(response, 'forecast.forecast') ?? at(response, 'forecast');
  const step = num(progress, 'step');
  const totalSteps = num(progress, 'totalSteps') ?? num(progress, 'total_steps');
  const fraction =
    num(forecast, 'fractionDone') ??
    num(progress, 'fraction') ??
    (step !== undefined && totalSteps ? step / totalSteps : undefined);
  return {
    jobId: str(job, 'jobId'),
    state: str(job, 'state'),
    tier: str(job, 'tier'),
    attempts: attempts.length || (num(job, 'counters.attempts') ?? 0),
    capacity: str(last, 'capacity'),
    step,
    totalSteps,
    fraction,
    loss: num(progress, 'loss'),
    etaSeconds: num(forecast, 'etaSeconds.value') ?? num(forecast, 'etaSeconds'),
    costSoFarUsd: num(response, 'costSoFarUsd') ?? num(job, 'costSoFarUsd'),
    projectedTotalUsd: num(forecast, 'projectedTotalUsd'),
    reason: str(job, 'reason'),
  };
}

/** One line for `watch`: state, bar, step, loss, ETA, cost so far → forecast total, attempt. */
export function statusLine(view: JobView): string {
  const parts = [(view.state ?? 'UNKNOWN').padEnd(13)];
  if (view.fraction !== undefined) parts.push(progressBar(view.fraction));
  if (view.step !== undefined) parts.push(`step ${view.step}${view.totalSteps ? `/${view.totalSteps}` : ''}`);
  if (view.loss !== undefined) parts.push(`loss ${Number(view.loss.toPrecision(4))}`);
  if (view.etaSeconds !== undefined) parts.push(`ETA ${formatDuration(view.etaSeconds)}`);
  if (view.costSoFarUsd !== undefined) {
    parts.push(
      `cost ${formatMoney(view.costSoFarUsd)}${view.projectedTotalUsd === undefined ? '' : ` → ${formatMoney(view.projectedTotalUsd)}`}`,
    );
  }
  if (view.attempts > 0) parts.push(`attempt ${view.attempts}${view.capacity ? ` (${view.capacity})` : ''}`);
  return parts.join('  ').trimEnd();
}

/** The full status view (`trainyard status`). */
export function formatJobStatus(response: unknown): string {
  const view = jobView(response);
  const job = jobOf(response);
  const lines = [`Job ${view.jobId ?? '?'}`];
  lines.push(
    ...rows([
      ['state', `${view.state ?? 'UNKNOWN'}${view.reason ? ` — ${view.reason}` : ''}`],
      ['tier', view.tier],
      ['command', list(job, 'command').length ? list(job, 'command').join(' ') : undefined],
      ['labels', labelsOf(at(job, 'labels'))],
      ['created', str(job, 'createdAt')],
      [
        'progress',
        view.fraction === undefined
          ? undefined
          : `${progressBar(view.fraction)}${view.step === undefined ? '' : `  step ${view.step}${view.totalSteps ? `/${view.totalSteps}` : ''}`}`,
      ],
      ['loss', view.loss === undefined ? undefined : String(Number(view.loss.toPrecision(4)))],
      ['ETA', view.etaSeconds === undefined ? undefined : formatDuration(view.etaSeconds)],
      ['cost so far', view.costSoFarUsd === undefined ? undefined : formatMoney(view.costSoFarUsd)],
      [
        'forecast',
        view.projectedTotalUsd !== undefined
          ? `${formatMoney(view.projectedTotalUsd)} total`
          : str(response, 'forecast.reason') && !isTerminal(view.state)
            ? `not yet: ${str(response, 'forecast.reason')}`
            : undefined,
      ],
      [
        'estimate',
        num(job, 'estimate.costUsd') === undefined ? undefined : formatMoney(num(job, 'estimate.costUsd') ?? 0),
      ],
    ]),
  );
  const attempts = list(response, 'attempts');
  if (attempts.length) {
    lines.push('', 'Attempts');
    for (const attempt of attempts) {
      const started = num(attempt, 'startedAt');
      const stopped = num(attempt, 'stoppedAt');
      const duration =
        started !== undefined && stopped !== undefined ? formatDuration((stopped - started) / 1000) : undefined;
      const price = num(attempt, 'usdPerHour');
      const cost = num(attempt, 'costUsd');
      const outcome = at(attempt, 'outcome');
      const outcomeText = typeof outcome === 'string' ? outcome : (str(outcome, 'kind') ?? str(outcome, 'type'));
      lines.push(
        `  #${num(attempt, 'attempt') ?? '?'}  ${[
          str(attempt, 'capacity'),
          str(attempt, 'status'),
          outcomeText,
          str(attempt, 'instanceId'),
          price === undefined ? undefined : `${formatRate(price)}/h`,
          duration,
          cost === undefined ? undefined : formatMoney(cost),
        ]
          .filter((p) => p !== undefined)
          .join('  ')}`,
      );
      const orphans = at(attempt, 'orphans');
      for (const [batchJobId, run] of Object.entries(orphans !== null && typeof orphans === 'object' ? orphans : {})) {
        const [start, stop, orphanCost] = [num(run, 'startedAt'), num(run, 'stoppedAt'), num(run, 'costUsd')];
        lines.push(
          `      orphaned Batch job ${batchJobId}  ${[
            str(run, 'capacity'),
            start !== undefined && stop !== undefined ? formatDuration((stop - start) / 1000) : undefined,
            orphanCost === undefined ? undefined : formatMoney(orphanCost),
          ]
            .filter((p) => p !== undefined)
            .join('  ')}  (stopped by Trainyard, billed to the job)`,
        );
      }
    }
  }
  const decisions = list(response, 'decisions');
  if (decisions.length) {
    lines.push('', 'Decisions');
    for (const d of decisions) {
      lines.push(`  ${str(d, 'at') ?? ''}  ${str(d, 'decision') ?? ''} — ${str(d, 'reason') ?? ''}`);
    }
  }
  return lines.join('\n');
}

/** A job's labels (as the API returns them) as `key=value` pairs in key order; undefined for none. */
function labelsOf(labels: unknown): string | undefined {
  if (typeof labels !== 'object' || labels === null) return undefined;
  return labelsText(labels as JobLabels, ' ');
}

/**
 * The jobs list (GET /jobs) as a table, with a LABELS column when a job on the page has labels. A label-filtered page
 * can come back empty with a cursor (the API reads a bounded number of jobs per page): it says where to go on.
 */
export function formatJobsTable(response: unknown): string {
  const jobs = Array.isArray(response) ? response : list(response, 'jobs');
  const cursor = str(response, 'nextCursor') ?? str(response, 'cursor');
  if (jobs.length === 0) {
    return cursor ? `No matching jobs on this page; older jobs remain: --cursor ${cursor}` : 'No jobs.';
  }
  const labelled = jobs.some((job) => labelsOf(at(job, 'labels')) !== undefined);
  const table = [['JOB', 'STATE', 'TIER', 'CREATED', 'COST', ...(labelled ? ['LABELS'] : []), 'COMMAND']];
  for (const job of jobs) {
    table.push([
      str(job, 'jobId') ?? '?',
      str(job, 'state') ?? '?',
      str(job, 'tier') ?? '',
      str(job, 'createdAt') ?? '',
      num(job, 'costSoFarUsd') === undefined ? '' : formatMoney(num(job, 'costSoFarUsd') ?? 0),
      ...(labelled ? [labelsOf(at(job, 'labels')) ?? ''] : []),
      list(job, 'command').join(' '),
    ]);
  }
  const out = alignTable(table);
  return cursor ? `${out}\n(more: --cursor ${cursor})` : out;
}

/**
 * Tiers (GET /tiers) as a table: prices, what the watch last saw of spot, the spot model the tier is planned with,
 * where the spot price came from.
 */
export function formatTiers(response: unknown): string {
  const tiers = Array.isArray(response) ? response : list(response, 'tiers');
  if (tiers.length === 0) return 'No tiers.';
  const table = [['TIER', 'ON-DEMAND/h', 'SPOT/h', 'SPOT NOW', 'SPOT MODEL', 'SOURCE']];
  for (const t of tiers) {
    const od = num(t, 'onDemandUsdPerHour') ?? num(t, 'price.onDemandUsdPerHour');
    const spot = num(t, 'spotUsdPerHour') ?? num(t, 'price.spotUsdPerHour');
    table.push([
      str(t, 'tier') ?? str(t, 'id') ?? '?',
      od === undefined ? '' : formatRate(od),
      spot === undefined ? '—' : formatRate(spot),
      formatSpotCapacity(at(t, 'spotCapacity')),
      formatSpotModel(at(t, 'spotCapacity')),
      str(t, 'spotSource') ?? str(t, 'price.spotSource') ?? '',
    ]);
  }
  return alignTable(table);
}

function alignTable(table: string[][]): string {
  const widths = (table[0] ?? []).map((_, i) => Math.max(...table.map((r) => (r[i] ?? '').length)));
  return table
    .map((r) =>
      r
        .map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** Budgets (GET /budgets) as a table. */
export function formatBudgets(response: unknown): string {
  const budgets = Array.isArray(response)
    ? response
    : list(response, 'budgets').length
      ? list(response, 'budgets')
      : list(response, 'scopes');
  if (budgets.length === 0) {
    const team = str(response, 'team');
    const period = str(response, 'period');
    return team && period ? `No budgets for team ${team} in ${period}.` : 'No budgets.';
  }
  const table = [['SCOPE', 'PERIOD', 'LIMIT', 'SPENT', 'RESERVED', 'AVAILABLE', 'USED', 'ALERTS']];
  for (const b of budgets) {
    const money = (path: string) => (num(b, path) === undefined ? '' : formatMoney(num(b, path) ?? 0));
    const percent = num(b, 'percentUsed') ?? num(b, 'percent');
    const crossed = list(b, 'thresholdsCrossed').join(',');
    table.push([
      str(b, 'scope') ?? '?',
      str(b, 'period') ?? '',
      money('limitUsd'),
      money('spentUsd'),
      money('reservedUsd'),
      money('availableUsd'),
      percent === undefined ? '' : `${percent.toFixed(1)}%`,
      `${crossed}${at(b, 'blocked') === true ? `${crossed ? ',' : ''}BLOCKED` : ''}`,
    ]);
  }
  return alignTable(table);
}

/** What each threshold means once a budget has crossed it (docs/operations.md "Budgets"). */
const CROSSED: Readonly<Record<string, string>> = {
  warn: "the team's cost alert has gone out",
  block:
    "new jobs in it are refused, and its running jobs checkpoint and pause at budget-watch's next check (within 5 minutes)",
};

/** A budget an admin set (PUT /budgets/{scope}): its figures now, and what the thresholds its new limit crossed do. */
export function formatBudgetSet(response: unknown): string {
  const budget = at(response, 'budget');
  const lines = [
    `Budget ${str(budget, 'scope') ?? '?'} for ${str(budget, 'period') ?? '?'}: limit ${formatMoney(num(budget, 'limitUsd') ?? 0)}.`,
    formatBudgets([budget]),
  ];
  for (const crossing of list(response, 'crossings')) {
    const threshold = str(crossing, 'threshold') ?? '?';
    const committed = (num(crossing, 'spentUsd') ?? 0) + (num(crossing, 'reservedUsd') ?? 0);
    lines.push(
      `Crossed ${threshold}: ${formatMoney(committed)} spent and reserved of ${formatMoney(num(crossing, 'limitUsd') ?? 0)}; ${CROSSED[threshold] ?? 'see docs/operations.md'}.`,
    );
  }
  return lines.join('\n');
}

/**
 * A showback (GET /reports/showback): the team's totals, then who spent it (users, projects, tiers) and the dearest
 * jobs (`maxJobs`; the rest are counted).
 */
export function formatShowback(response: unknown, maxJobs = 10): string {
  const money = (row: unknown, path: string) => formatMoney(num(row, path) ?? 0);
  const hours = (row: unknown) => {
    const h = num(row, 'instanceHours') ?? 0;
    return h.toFixed(h < 10 ? 2 : 1);
  };
  const label = str(response, 'label');
  const lines = [
    `Team ${str(response, 'team') ?? '?'}${label === undefined ? '' : `, jobs with --label ${label}`}, ${str(response, 'periodStart') ?? '?'} to ${str(response, 'periodEnd') ?? '?'} (UTC, as of ${str(response, 'asOf') ?? '?'})`,
  ];
  const totals = at(response, 'totals');
  const jobs = num(totals, 'jobs') ?? 0;
  if (jobs === 0) {
    return `${lines[0]}\nNo job${label === undefined ? '' : ' with that label'} ran in this period: nothing spent.`;
  }
  lines.push(
    `Spent ${money(totals, 'costUsd')} on ${jobs} job${jobs === 1 ? '' : 's'}, ${hours(totals)} instance-hours: spot ${money(totals, 'spotUsd')}, on-demand ${money(totals, 'onDemandUsd')}; spot saved ${money(totals, 'savedBySpotUsd')} against on-demand prices (${money(totals, 'onDemandEquivalentUsd')}).`,
  );
  const section = (title: string, key: string, label: string) => {
    const table = [[label, 'COST', 'SPOT', 'ON-DEMAND', 'HOURS', 'JOBS']];
    for (const row of list(response, key)) {
      table.push([
        str(row, label.toLowerCase()) ?? '(none)',
        money(row, 'costUsd'),
        money(row, 'spotUsd'),
        money(row, 'onDemandUsd'),
        hours(row),
        String(num(row, 'jobs') ?? 0),
      ]);
    }
    lines.push('', title, alignTable(table));
  };
  section('By user', 'byUser', 'USER');
  section('By project', 'byProject', 'PROJECT');
  section('By tier', 'byTier', 'TIER');
  const rows = list(response, 'jobs');
  const table = [['JOB', 'USER', 'PROJECT', 'TIER', 'STATE', 'COST', 'HOURS']];
  for (const job of rows.slice(0, maxJobs)) {
    table.push([
      str(job, 'jobId') ?? '?',
      str(job, 'user') ?? '',
      str(job, 'project') ?? '',
      str(job, 'tier') ?? '',
      str(job, 'state') ?? '',
      money(job, 'costUsd'),
      hours(job),
    ]);
  }
  lines.push('', rows.length > maxJobs ? `Dearest ${maxJobs} of ${rows.length} jobs` : 'Jobs', alignTable(table));
  return lines.join('\n');
}

/** Checkpoints (GET /jobs/{id}/checkpoints), in the API's order (newest first). */
export function formatCheckpoints(response: unknown): string {
  const checkpoints = checkpointsOf(response);
  if (checkpoints.length === 0) return 'No complete checkpoints yet.';
  const table = [['CHECKPOINT', 'STEP', 'ATTEMPT', 'CREATED', 'FILES', 'SIZE', 'NOTE']];
  for (const c of checkpoints) {
    // fileCount and bytes come with every checkpoint since the listing may leave files out; older APIs sent files only.
    const files = list(c, 'files');
    const fileCount = num(c, 'fileCount') ?? files.length;
    const bytes = num(c, 'bytes') ?? files.reduce<number>((sum, f) => sum + (num(f, 'size') ?? 0), 0);
    table.push([
      str(c, 'name') ?? '?',
      num(c, 'step') === undefined ? '' : String(num(c, 'step')),
      num(c, 'attempt') === undefined ? '' : String(num(c, 'attempt')),
      str(c, 'createdAt') ?? '',
      String(fileCount),
      formatBytes(bytes),
      resumeNote(num(c, 'resumeFailures') ?? 0, at(c, 'setAside') === true),
    ]);
  }
  return alignTable(table);
}

/** What failed resumes say about a checkpoint: nothing, `1 failed resume`, or `set aside after 2 failed resumes`. */
function resumeNote(failures: number, setAside: boolean): string {
  const counted = `${failures} failed resume${failures === 1 ? '' : 's'}`;
  if (setAside) return `set aside after ${counted}`;
  return failures > 0 ? counted : '';
}

/** The checkpoint entries of a GET /jobs/{id}/checkpoints answer. */
export function checkpointsOf(response: unknown): unknown[] {
  return Array.isArray(response) ? response : list(response, 'checkpoints');
}

/** Bytes for people: `512 B`, `1.5 KiB`, `12.0 MiB`, `3.20 GiB`. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  if (bytes < 1024 ** 3) return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
  return `${(bytes / 1024 ** 3).toFixed(2)} GiB`;
}

/** One log line as the logs route returns it: a string, or `{ timestamp, message }`. */
export interface LogLine {
  readonly timestamp?: number;
  readonly message: string;
}

/** The lines of a GET /jobs/{id}/logs answer (`lines` or `events`, strings or objects). */
export function logLinesOf(response: unknown): LogLine[] {
  const raw = Array.isArray(response)
    ? response
    : list(response, 'lines').length
      ? list(response, 'lines')
      : list(response, 'events');
  return raw.flatMap((entry): LogLine[] => {
    if (typeof entry === 'string') return [{ message: entry }];
    const message = at(entry, 'message');
    if (typeof message !== 'string') return [];
    const timestamp = num(entry, 'timestamp');
    return [timestamp === undefined ? { message } : { timestamp, message }];
  });
}
