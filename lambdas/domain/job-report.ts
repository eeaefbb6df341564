/**
 * The job report (DESIGN "Progress, forecast, reports"): one self-contained HTML document that Finalize writes beside
 * the JSON summary. Inline CSS and inline SVG only, and a Content-Security-Policy that forbids scripts and fetches,
 * so it opens from S3 or a laptop offline. Header facts, then three plots (loss, cumulative cost with interruptions
 * marked, GPU utilisation) and the attempts and decisions tables. Everything that comes from a user, a script or
 * Batch is HTML-escaped. A series longer than MAX_PLOT_POINTS is thinned (first, last and each bucket's extremes), so
 * a million samples still make a report of well under a megabyte. Pure: no I/O, never throws for valid records.
 */
import { billedRunsOf, orphanRunsOf } from './attempt-cost';
import { type AttemptRecord, computeSecondsOf, type DecisionRecord, type JobRecord } from './job';
import { labelsText } from './labels';
import { attemptCostUsd, InvalidMeteringInput } from './metering';
import { type MetricSample, readMetricsLog } from './metric-samples';

/** The most points one series of a plot draws. */
export const MAX_PLOT_POINTS = 2000;

/** What the report is made from. */
export interface JobReportInput {
  /** The job record in its final state. */
  readonly job: JobRecord;
  readonly attempts: readonly AttemptRecord[];
  readonly decisions: readonly DecisionRecord[];
  /** The job's cost, as Finalize settled it (the attempts' recorded costs, to the cent). */
  readonly costUsd: number;
  /** When Finalize ended the job, ISO-8601. */
  readonly finishedAt: string;
  /** The harness's metrics.jsonl, as text or bytes; absent when the job has none. */
  readonly metricsLog?: string | Uint8Array;
  /** Why the metrics log was not read (e.g. too large); shown where the sample plots would be. */
  readonly metricsOmitted?: string;
}

// ---------------------------------------------------------------------------------------------------------------
// Data: cost curve, sample series, downsampling

/** One point of the cumulative cost curve. */
export interface CostPoint {
  readonly atMs: number;
  readonly usd: number;
}

/** Which capacity was accruing cost over a stretch of the curve; `none` between attempts. */
export type CostStretchKind = 'spot' | 'on-demand' | 'none';

/** A stretch of the cost curve accruing on one kind of capacity; consecutive stretches share their end points. */
export interface CostStretch {
  readonly kind: CostStretchKind;
  readonly points: readonly CostPoint[];
}

interface Accrual {
  readonly startMs: number;
  readonly stopMs: number;
  readonly microUsd: number;
  readonly capacity: 'spot' | 'on-demand';
}

/** An attempt's cost: the recorded one, else metered from its times and price (60 s minimum), else 0. */
function attemptMicroUsd(attempt: AttemptRecord, stopMs: number): number {
  if (attempt.costUsd !== undefined) return Math.round(attempt.costUsd * 1_000_000);
  if (attempt.startedAt === undefined || attempt.usdPerHour === undefined) return 0;
  try {
    const usage = { startedAtMs: attempt.startedAt, stoppedAtMs: stopMs, usdPerHour: attempt.usdPerHour };
    return Math.round(attemptCostUsd({ ...usage, nodes: attempt.nodes }) * 1_000_000);
  } catch (error) {
    if (error instanceof InvalidMeteringInput) return 0; // a record metering refuses adds nothing to the curve
    throw error;
  }
}

/**
 * The job's cumulative cost over time, from `fromMs` to `toMs`: each attempt, and each orphaned Batch job recorded on
 * one ({@link billedRunsOf}), accrues its cost linearly between its start and stop (a running attempt until `toMs`; a
 * cost without a start lands at once at the stop), so the curve ends at the sum of the recorded costs. Split into
 * stretches by the capacity accruing, for colour and legend.
 */
export function costCurve(
  attempts: readonly AttemptRecord[],
  fromMs: number,
  toMs: number,
): { stretches: CostStretch[]; totalUsd: number } {
  const accruals: Accrual[] = attempts.flatMap(billedRunsOf).flatMap((a) => {
    const stopMs = a.stoppedAt ?? (a.startedAt !== undefined ? Math.max(toMs, a.startedAt) : undefined);
    const startMs = a.startedAt ?? stopMs;
    if (startMs === undefined || stopMs === undefined) return [];
    const microUsd = attemptMicroUsd(a, stopMs);
    if (a.startedAt === undefined && microUsd === 0) return []; // never ran, cost nothing (capacity-starved)
    // A zero-length accrual becomes a 1 ms ramp: a vertical step on the plot, no division by zero.
    return [{ startMs, stopMs: Math.max(stopMs, startMs + 1), microUsd, capacity: a.capacity }];
  });
  const times = [fromMs, toMs, ...accruals.flatMap((a) => [a.startMs, a.stopMs])];
  const breakpoints = [...new Set(times)].sort((a, b) => a - b);
  const valueAt = (t: number): number =>
    accruals.reduce((sum, a) => {
      const fraction = t <= a.startMs ? 0 : t >= a.stopMs ? 1 : (t - a.startMs) / (a.stopMs - a.startMs);
      return sum + a.microUsd * fraction;
    }, 0) / 1_000_000;
  const points = breakpoints.map((atMs) => ({ atMs, usd: valueAt(atMs) }));
  const stretches: Array<{ kind: CostStretchKind; points: CostPoint[] }> = [];
  for (let i = 0; i + 1 < points.length; i++) {
    const [from, to] = [breakpoints[i] as number, breakpoints[i + 1] as number];
    const running = accruals.filter((a) => a.startMs <= from && a.stopMs >= to);
    const kind: CostStretchKind = running.some((a) => a.capacity === 'on-demand')
      ? 'on-demand'
      : running.length > 0
        ? 'spot'
        : 'none';
    const last = stretches.at(-1);
    if (last?.kind === kind) last.points.push(points[i + 1] as CostPoint);
    else stretches.push({ kind, points: [points[i] as CostPoint, points[i + 1] as CostPoint] });
  }
  const totalUsd = accruals.reduce((sum, a) => sum + a.microUsd, 0) / 1_000_000;
  return { stretches, totalUsd };
}

/** A series as parallel x and y arrays. */
export interface XY {
  readonly xs: readonly number[];
  readonly ys: readonly number[];
}

/**
 * At most `max` points of a series that keep its shape: the first and the last, and in each of (max − 2) / 2 equal
 * index buckets between them the lowest and the highest y, in their order (so spikes and the range survive).
 */
export function downsample(series: XY, max: number): XY {
  const n = series.ys.length;
  if (n <= max) return series;
  const keep: number[] = [0];
  const buckets = Math.floor((max - 2) / 2);
  const inner = n - 2;
  for (let b = 0; b < buckets; b++) {
    const lo = 1 + Math.floor((b * inner) / buckets);
    const hi = 1 + Math.floor(((b + 1) * inner) / buckets);
    let low = lo;
    let high = lo;
    for (let i = lo + 1; i < hi; i++) {
      const y = series.ys[i] as number;
      if (y < (series.ys[low] as number)) low = i;
      if (y > (series.ys[high] as number)) high = i;
    }
    if (hi > lo) keep.push(...(low === high ? [low] : [Math.min(low, high), Math.max(low, high)]));
  }
  keep.push(n - 1);
  return { xs: keep.map((i) => series.xs[i] as number), ys: keep.map((i) => series.ys[i] as number) };
}

/** One metric's values with where (step, time) and in which attempt they were taken; NaN where absent. */
class Column {
  readonly steps: number[] = [];
  readonly times: number[] = [];
  readonly attempts: number[] = [];
  readonly values: number[] = [];

  add(sample: MetricSample, value: number): void {
    this.steps.push(sample.step ?? Number.NaN);
    this.times.push(sample.timeMs ?? Number.NaN);
    this.attempts.push(sample.attempt ?? Number.NaN);
    this.values.push(value);
  }

  get size(): number {
    return this.values.length;
  }

  hasSteps(): boolean {
    return this.steps.some((s) => !Number.isNaN(s));
  }

  /**
   * Values over step. A resume restarts from the checkpoint's step and redoes the steps after it, so a step at or
   * below the previous one drops the earlier values from there on: what remains is the run the final model went
   * through (the redone work shows in the cost plot).
   */
  byStep(): XY {
    const xs: number[] = [];
    const ys: number[] = [];
    this.steps.forEach((step, i) => {
      if (Number.isNaN(step)) return;
      while (xs.length > 0 && (xs.at(-1) as number) >= step) {
        xs.pop();
        ys.pop();
      }
      xs.push(step);
      ys.push(this.values[i] as number);
    });
    return { xs, ys };
  }

  /** Values over time (`toX` maps epoch ms to the axis), one run per attempt so gaps between attempts stay gaps. */
  byTime(toX: (ms: number) => number): XY[] {
    const runs: Array<{ xs: number[]; ys: number[] }> = [];
    let attempt = Number.NaN;
    this.times.forEach((ms, i) => {
      if (Number.isNaN(ms)) return;
      const current = this.attempts[i] as number;
      const last = runs.at(-1);
      if (!last || !Object.is(current, attempt)) runs.push({ xs: [toX(ms)], ys: [this.values[i] as number] });
      else {
        last.xs.push(toX(ms));
        last.ys.push(this.values[i] as number);
      }
      attempt = current;
    });
    return runs;
  }

  timeRange(): [number, number] | undefined {
    let [lo, hi] = [Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY];
    for (const ms of this.times) {
      if (ms < lo) lo = ms;
      if (ms > hi) hi = ms;
    }
    return lo <= hi ? [lo, hi] : undefined;
  }
}

const LOSS_FIELDS = [
  { field: 'loss', label: 'loss', colour: '#1f77b4', dash: '' },
  { field: 'trainLoss', label: 'train loss', colour: '#2ca02c', dash: '7 4' },
  { field: 'valLoss', label: 'validation loss', colour: '#d62728', dash: '2 3' },
] as const;

interface Samples {
  readonly count: number;
  readonly malformedLines: number;
  readonly loss: ReadonlyArray<{ readonly spec: (typeof LOSS_FIELDS)[number]; readonly column: Column }>;
  readonly gpu: Column;
}

function collectSamples(log: string | Uint8Array | undefined): Samples {
  const loss = LOSS_FIELDS.map((spec) => ({ spec, column: new Column() }));
  const gpu = new Column();
  if (log === undefined) return { count: 0, malformedLines: 0, loss, gpu };
  const stats = readMetricsLog(log, (sample) => {
    for (const { spec, column } of loss) {
      const value = sample[spec.field];
      if (value !== undefined) column.add(sample, value);
    }
    if (sample.gpuUtil !== undefined) gpu.add(sample, sample.gpuUtil);
  });
  return { count: stats.samples, malformedLines: stats.malformedLines, loss, gpu };
}

// ---------------------------------------------------------------------------------------------------------------
// Formatting

/** Escapes text for HTML element content and attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Escapes every value interpolated into the template; strings from records are never trusted. */
function html(strings: TemplateStringsArray, ...values: Array<string | number | Raw>): Raw {
  let out = strings[0] ?? '';
  values.forEach((value, i) => {
    out += (value instanceof Raw ? value.text : escapeHtml(String(value))) + (strings[i + 1] ?? '');
  });
  return new Raw(out);
}

/** Markup that is already safe (built by {@link html}). */
class Raw {
  constructor(readonly text: string) {}
}

const join = (parts: readonly Raw[], separator = ''): Raw => new Raw(parts.map((p) => p.text).join(separator));

function trimmed(value: number, maxDecimals: number, minDecimals: number): string {
  const fixed = value.toFixed(maxDecimals);
  const [whole, fraction = ''] = fixed.split('.');
  const kept = fraction.replace(/0+$/, '').padEnd(minDecimals, '0');
  return kept ? `${whole}.${kept}` : (whole as string);
}

function usd(value: number, maxDecimals = 2): string {
  return `$${trimmed(value, maxDecimals, 2)}`;
}

function grouped(value: number): string {
  const [whole, fraction] = String(value).split('.');
  const withCommas = (whole as string).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return fraction === undefined ? withCommas : `${withCommas}.${fraction}`;
}

function utc(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** `2 h 05 min`, `3 min 20 s`, `1 d 4 h`. */
function duration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
  return `${Math.floor(s / 86_400)} d ${Math.floor((s % 86_400) / 3600)} h`;
}

/** The command as a shell would read it back. */
function shellWords(words: readonly string[]): string {
  return words.map((w) => (/^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`)).join(' ');
}

function delta(actual: number, estimate: number): string {
  if (estimate <= 0) return '';
  const percent = Math.round(((actual - estimate) / estimate) * 100);
  return ` (${percent >= 0 ? '+' : ''}${percent} %)`;
}

// ---------------------------------------------------------------------------------------------------------------
// SVG line plot, shared by the three plots

/** A drawn series: its runs are drawn as separate lines (no line across a gap). */
interface PlotSeries {
  readonly label: string;
  readonly colour: string;
  /** SVG stroke-dasharray; empty for solid. Dash patterns tell series apart without colour. */
  readonly dash: string;
  readonly runs: readonly XY[];
}

/** A vertical marker with a label (an interrupted attempt). */
interface PlotMarker {
  readonly x: number;
  readonly label: string;
  readonly outcome: string;
  readonly attempt: number;
}

interface PlotSpec {
  readonly id: string;
  readonly title: string;
  readonly xLabel: string;
  readonly yLabel: string;
  readonly series: readonly PlotSeries[];
  readonly xDomain?: readonly [number, number];
  readonly yDomain?: readonly [number, number];
  readonly yFormat?: (value: number) => string;
  readonly markers?: readonly PlotMarker[];
  readonly legend?: readonly Raw[];
  readonly caption?: Raw;
}

const WIDTH = 760;
const HEIGHT = 300;
const MARGIN = { left: 72, right: 20, top: 14, bottom: 46 };
const MARKER_ROWS = 3;

function tickStep(lo: number, hi: number): number {
  const raw = (hi - lo) / 6;
  if (!(raw > 0) || !Number.isFinite(raw)) return 0;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  return ([1, 2, 2.5, 5, 10].find((m) => m * magnitude >= raw) ?? 10) * magnitude;
}

/** Most ticks an axis gets: a "nice" step over a domain gives about 6; the cap bounds one that rounding confuses. */
const MAX_TICKS = 20;

/** Tick values: about 6 "nice" steps (1, 2, 2.5, 5 × 10^k) across the domain, and the decimals their labels need. */
function ticks(lo: number, hi: number): { values: number[]; decimals: number } {
  const step = tickStep(lo, hi);
  if (step === 0) return { values: [lo], decimals: 0 };
  const values: number[] = [];
  // Counted, not accumulated: at a magnitude where the step is below the spacing of doubles, `v += step` never moves.
  const first = Math.ceil(lo / step - 1e-9);
  for (let i = 0; i < MAX_TICKS; i++) {
    const v = (first + i) * step;
    if (v > hi + step * 1e-9) break;
    values.push(Number(v.toFixed(12)));
  }
  let decimals = 0;
  while (decimals < 12 && Math.abs(Math.round(step * 10 ** decimals) - step * 10 ** decimals) > 1e-6) decimals += 1;
  return { values, decimals };
}

/** The data's extent widened to whole ticks, so both ends of an axis are labelled. */
function niceExtent(values: Iterable<number>): [number, number] {
  const [lo, hi] = extent(values, [0, 1]);
  const step = tickStep(lo, hi);
  return step === 0 ? [lo, hi] : [Math.floor(lo / step) * step, Math.ceil(hi / step) * step];
}

function extent(values: Iterable<number>, fallback: readonly [number, number]): [number, number] {
  let [lo, hi] = [Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY];
  for (const v of values) {
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (lo > hi) return [fallback[0], fallback[1]];
  // Equal, or apart by rounding alone (0.3 and 0.1 + 0.2; a loss levelled off in float noise): drawn as one value.
  if (hi - lo <= Math.max(Math.abs(lo), Math.abs(hi)) * 1e-9) {
    const pad = Math.abs(lo) * 0.1 || 1;
    return [lo - pad, hi + pad];
  }
  return [lo, hi];
}

const coordinate = (v: number): string => String(Math.round(v * 10) / 10);

function swatch(colour: string, dash: string): Raw {
  return html`<svg class="swatch" width="30" height="10" aria-hidden="true"><line x1="1" y1="5" x2="29" y2="5" stroke="${colour}" stroke-width="2.5"${dashAttribute(dash)}/></svg>`;
}

function dashAttribute(dash: string): Raw {
  return new Raw(dash ? ` stroke-dasharray="${escapeHtml(dash)}"` : '');
}

/** A line plot with axes, tick labels, grid, optional vertical markers and an HTML legend. */
function linePlot(spec: PlotSpec): Raw {
  const series = spec.series.map((s) => {
    const total = s.runs.reduce((n, r) => n + r.xs.length, 0);
    const runs = s.runs
      .filter((r) => r.xs.length > 0)
      .map((r) => downsample(r, Math.max(2, Math.floor((MAX_PLOT_POINTS * r.xs.length) / Math.max(1, total)))));
    return { ...s, runs };
  });
  const allX = series.flatMap((s) => s.runs.flatMap((r) => r.xs));
  const allY = series.flatMap((s) => s.runs.flatMap((r) => r.ys));
  const [x0, x1] = spec.xDomain ?? niceExtent(allX);
  const [y0, y1] = spec.yDomain ?? niceExtent(allY);
  const top = MARGIN.top + (spec.markers?.length ? MARKER_ROWS * 12 : 0);
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - top - MARGIN.bottom;
  const sx = (x: number) => MARGIN.left + ((x - x0) / (x1 - x0 || 1)) * plotW;
  const sy = (y: number) => top + plotH - ((y - y0) / (y1 - y0 || 1)) * plotH;
  const xTicks = ticks(x0, x1);
  const yTicks = ticks(y0, y1);
  const yFormat = spec.yFormat ?? ((v: number) => grouped(Number(v.toFixed(yTicks.decimals))));
  const bottom = top + plotH;

  const grid = yTicks.values.map(
    (v) =>
      html`<line class="grid" x1="${MARGIN.left}" x2="${MARGIN.left + plotW}" y1="${coordinate(sy(v))}" y2="${coordinate(sy(v))}"/><text class="tick" x="${MARGIN.left - 6}" y="${coordinate(sy(v) + 4)}" text-anchor="end">${yFormat(v)}</text>`,
  );
  const xTickMarks = xTicks.values.map(
    (v) =>
      html`<line class="axis" x1="${coordinate(sx(v))}" x2="${coordinate(sx(v))}" y1="${bottom}" y2="${bottom + 5}"/><text class="tick" x="${coordinate(sx(v))}" y="${bottom + 18}" text-anchor="middle">${grouped(Number(v.toFixed(xTicks.decimals)))}</text>`,
  );
  const lines = series.flatMap((s) =>
    s.runs.map((r) => {
      const points = r.xs.map((x, i) => `${coordinate(sx(x))},${coordinate(sy(r.ys[i] as number))}`);
      if (points.length === 1) {
        // A lone sample (one evaluation, a short attempt) draws no line: show it as a dot.
        const [cx, cy] = (points[0] as string).split(',');
        return html`<circle data-series="${s.label}" cx="${cx as string}" cy="${cy as string}" r="3" fill="${s.colour}"/>`;
      }
      return html`<polyline data-series="${s.label}" points="${points.join(' ')}" fill="none" stroke="${s.colour}" stroke-width="2" stroke-linejoin="round"${dashAttribute(s.dash)}/>`;
    }),
  );
  const markers = (spec.markers ?? []).map((m, i) => {
    const x = coordinate(sx(m.x));
    const labelY = MARGIN.top + 9 + (i % MARKER_ROWS) * 12;
    const reclaim = m.outcome === 'reclaimed';
    return html`<g class="marker${reclaim ? ' reclaim' : ''}" data-outcome="${m.outcome}" data-attempt="${m.attempt}"><line x1="${x}" x2="${x}" y1="${labelY + 3}" y2="${bottom}"/><text x="${x}" y="${labelY}" text-anchor="middle">${m.label}</text></g>`;
  });
  const legend = [
    ...series.map((s) => html`<li>${swatch(s.colour, s.dash)} ${s.label}</li>`),
    ...(spec.legend ?? []).map((item) => html`<li>${item}</li>`),
  ];
  return html`<figure class="plot" id="plot-${spec.id}">
<figcaption>${spec.title}</figcaption>
<ul class="legend">${join(legend)}</ul>
<svg viewBox="0 0 ${WIDTH} ${HEIGHT}" width="${WIDTH}" height="${HEIGHT}" role="img" aria-label="${spec.title}" xmlns="http://www.w3.org/2000/svg">
${join(grid)}
<line class="axis" x1="${MARGIN.left}" x2="${MARGIN.left}" y1="${top}" y2="${bottom}"/><line class="axis" x1="${MARGIN.left}" x2="${MARGIN.left + plotW}" y1="${bottom}" y2="${bottom}"/>
${join(xTickMarks)}
<text class="label" x="${MARGIN.left + plotW / 2}" y="${HEIGHT - 8}" text-anchor="middle">${spec.xLabel}</text>
<text class="label" transform="translate(16 ${top + plotH / 2}) rotate(-90)" text-anchor="middle">${spec.yLabel}</text>
${join(lines, '\n')}
${join(markers, '\n')}
</svg>
${spec.caption ?? ''}
</figure>`;
}

// ---------------------------------------------------------------------------------------------------------------
// The report

const TIME_UNITS = [
  { upToMs: 2 * 3_600_000, ms: 60_000, name: 'min' },
  { upToMs: 72 * 3_600_000, ms: 3_600_000, name: 'h' },
  { upToMs: Number.POSITIVE_INFINITY, ms: 86_400_000, name: 'd' },
] as const;

const CAPACITY_STYLE = {
  spot: { label: 'spot', colour: '#1f77b4', dash: '7 4' },
  'on-demand': { label: 'on-demand', colour: '#e66100', dash: '' },
  none: { label: 'no attempt running (no charge)', colour: '#8c8c8c', dash: '2 3' },
} as const;

/** Renders the job report: one self-contained HTML document. */
export function renderJobReport(input: JobReportInput): string {
  const { job } = input;
  const attempts = [...input.attempts].sort((a, b) => a.attempt - b.attempt);
  const samples = collectSamples(input.metricsOmitted === undefined ? input.metricsLog : undefined);

  // One time axis for every plot over time: submission to the last thing that happened.
  const createdMs = Date.parse(job.createdAt);
  const finishedMs = Date.parse(input.finishedAt);
  const sampleRanges = [samples.gpu, ...samples.loss.map((l) => l.column)].flatMap((c) => c.timeRange() ?? []);
  // Every billed run: an orphan that stopped after the job ended still draws its cost on this axis.
  const attemptTimes = attempts
    .flatMap(billedRunsOf)
    .flatMap((a) => [a.startedAt, a.stoppedAt].filter((t) => t !== undefined));
  const t0 = Math.min(createdMs, ...attemptTimes, ...sampleRanges);
  const t1 = Math.max(finishedMs, t0 + 1000, ...attemptTimes, ...sampleRanges);
  const unit = TIME_UNITS.find((u) => t1 - t0 <= u.upToMs) ?? TIME_UNITS[2];
  const toX = (ms: number) => (ms - t0) / unit.ms;
  const time: TimeAxis = { toX, domain: [0, toX(t1)], label: `time since submission (${unit.name})` };

  const reclaims = attempts.filter((a) => a.outcome?.kind === 'reclaimed').length;
  const fallbacks = attempts.filter(
    (a, i) => a.capacity === 'on-demand' && attempts[i - 1]?.capacity === 'spot',
  ).length;
  const computeSeconds = computeSecondsOf(attempts);

  const facts: Array<[string, Raw | string]> = [
    ['Job', html`<code>${job.jobId}</code>`],
    ['Team', job.team],
    ['User', job.user],
    ['Project', job.project ?? '—'],
    ['Labels', labelsText(job.labels, ' ') ?? '—'],
    ['Tier', job.tier],
    ['Command', html`<code>${shellWords(job.command)}</code>`],
    ['Final state', job.state],
    ['Reason', job.reason ?? '—'],
    ['Submitted', utc(createdMs)],
    ['Finished', utc(finishedMs)],
    ['Wall clock', duration((finishedMs - createdMs) / 1000)],
    ['Total cost', usd(input.costUsd)],
    ['Attempts', String(attempts.length)],
    ['Spot reclaims', String(reclaims)],
    ['On-demand fallbacks', String(fallbacks)],
    ['Compute time (all attempts)', duration(computeSeconds)],
  ];
  if (job.estimate) {
    const e = job.estimate;
    facts.push(
      ['Cost: estimate → actual', `${usd(e.costUsd)} → ${usd(input.costUsd)}${delta(input.costUsd, e.costUsd)}`],
      [
        'Runtime: estimate → actual',
        `${duration(e.runtimeSeconds)} → ${duration(computeSeconds)}${delta(computeSeconds, e.runtimeSeconds)}`,
      ],
      ['Estimate basis', `${e.basis} (confidence ${e.confidence})`],
    );
  } else {
    facts.push(['Estimate', 'none recorded (the job ended before the cost gate)']);
  }

  const sections = [lossSection(samples, time, input.metricsOmitted)];
  sections.push(costSection(attempts, t0, t1, time));
  sections.push(gpuSection(samples, time, input.metricsOmitted));

  // A Batch job that stopped after the job finished (an orphan, or an attempt's own that was still running) was billed,
  // and the report rewritten, after Finalize: the footer names the latest.
  const lateStops = attempts.flatMap((a) => [
    ...Object.values(a.orphans ?? {}).map((run) => ({ ms: run.stoppedAt, what: 'an orphaned Batch job' })),
    ...(a.endedAfterJob && a.stoppedAt !== undefined ? [{ ms: a.stoppedAt, what: `attempt ${a.attempt}` }] : []),
  ]);
  const late = lateStops.filter((s) => s.ms > finishedMs).sort((a, b) => b.ms - a.ms)[0];
  const written = late
    ? html`Written by Trainyard when the job finished (${utc(finishedMs)}), and again with the cost of ${late.what} that stopped at ${utc(late.ms)}`
    : html`Written by Trainyard when the job finished (${utc(finishedMs)})`;
  const metricsLine =
    input.metricsOmitted !== undefined
      ? html`metrics.jsonl not read: ${input.metricsOmitted}`
      : input.metricsLog === undefined
        ? html`no metrics.jsonl was written`
        : html`metrics.jsonl: ${grouped(samples.count)} samples, <span id="malformed-lines">${samples.malformedLines}</span> malformed line(s) skipped`;

  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>Trainyard job ${job.jobId}: ${job.state}</title>
<style>${new Raw(STYLESHEET)}</style>
</head>
<body>
<header>
<h1>Trainyard job <code>${job.jobId}</code> <span class="state state-${job.state.toLowerCase()}">${job.state}</span></h1>
<dl class="facts">
${join(facts.map(([k, v]) => html`<dt>${k}</dt><dd>${v}</dd>`))}
</dl>
</header>
${join(sections, '\n')}
<section id="attempts">
<h2>Attempts</h2>
${attemptsTable(attempts)}
</section>
<section id="decisions">
<h2>Decisions</h2>
${decisionsTable(input.decisions)}
</section>
<footer>${written}. ${metricsLine}.</footer>
</body>
</html>
`.text;
}

function note(text: Raw | string, id: string): Raw {
  return html`<p class="empty" id="${id}">${text}</p>`;
}

/** The time axis every plot over time shares: epoch ms → x, its domain and its label (with the unit). */
interface TimeAxis {
  readonly toX: (ms: number) => number;
  readonly domain: readonly [number, number];
  readonly label: string;
}

function lossSection(samples: Samples, time: TimeAxis, omitted: string | undefined): Raw {
  const present = samples.loss.filter((l) => l.column.size > 0);
  let body: Raw;
  if (omitted !== undefined) body = note(`No loss plot: metrics.jsonl was not read (${omitted}).`, 'no-loss');
  else if (present.length === 0) {
    body = note('No loss samples: metrics.jsonl holds no loss, train_loss or val_loss values.', 'no-loss');
  } else {
    const overSteps = present.some((l) => l.column.hasSteps());
    body = linePlot({
      id: 'loss',
      title: overSteps ? 'Loss over training step' : 'Loss over time (the samples carry no step)',
      xLabel: overSteps ? 'training step' : time.label,
      yLabel: 'loss',
      ...(overSteps ? {} : { xDomain: time.domain }),
      series: present.map(({ spec, column }) => ({
        label: spec.label,
        colour: spec.colour,
        dash: spec.dash,
        runs: overSteps ? [column.byStep()] : column.byTime(time.toX),
      })),
      ...(overSteps && {
        caption: html`<p class="note">Where a resumed attempt redid steps after its checkpoint, the redone values are shown.</p>`,
      }),
    });
  }
  return html`<section id="loss"><h2>Loss</h2>${body}</section>`;
}

function costSection(attempts: readonly AttemptRecord[], t0: number, t1: number, time: TimeAxis): Raw {
  const { toX } = time;
  const curve = costCurve(attempts, t0, t1);
  const byKind = (kind: CostStretchKind): PlotSeries => ({
    ...CAPACITY_STYLE[kind],
    runs: curve.stretches
      .filter((s) => s.kind === kind)
      .map((s) => ({ xs: s.points.map((p) => toX(p.atMs)), ys: s.points.map((p) => p.usd) })),
  });
  const series = (['spot', 'on-demand', 'none'] as const).map(byKind).filter((s) => s.runs.length > 0);
  const markers: PlotMarker[] = attempts.flatMap((a) =>
    a.outcome && a.outcome.kind !== 'succeeded' && a.stoppedAt !== undefined
      ? [{ x: toX(a.stoppedAt), label: `#${a.attempt} ${a.outcome.kind}`, outcome: a.outcome.kind, attempt: a.attempt }]
      : [],
  );
  const plot = linePlot({
    id: 'cost',
    title: `Cumulative cost: ${usd(curve.totalUsd)} over ${attempts.length} attempt(s)`,
    xLabel: time.label,
    yLabel: 'cumulative cost (USD)',
    xDomain: time.domain,
    ...(curve.totalUsd === 0 && { yDomain: [0, 1] as const }),
    yFormat: (v) => usd(v, 4),
    series,
    markers,
    legend: markers.length
      ? [
          html`<svg class="swatch" width="30" height="10" aria-hidden="true"><line class="marker-swatch reclaim" x1="15" y1="0" x2="15" y2="10"/></svg> reclaimed by AWS (spot)`,
          html`<svg class="swatch" width="30" height="10" aria-hidden="true"><line class="marker-swatch" x1="15" y1="0" x2="15" y2="10"/></svg> other interruption or failed attempt (label says which)`,
        ]
      : [],
    caption: html`<p class="note">Each attempt accrues its cost linearly from its start to its stop; a vertical line marks each attempt that ended other than by succeeding.</p>`,
  });
  return html`<section id="cost"><h2>Cost over time</h2>${plot}</section>`;
}

function gpuSection(samples: Samples, time: TimeAxis, omitted: string | undefined): Raw {
  const runs = samples.gpu.byTime(time.toX);
  const body =
    omitted !== undefined
      ? note(`No GPU utilisation plot: metrics.jsonl was not read (${omitted}).`, 'no-gpu')
      : runs.length === 0
        ? note(
            'No GPU utilisation samples: the harness records gpu_util only where nvidia-smi exists (GPU tiers).',
            'no-gpu',
          )
        : linePlot({
            id: 'gpu',
            title: 'GPU utilisation (mean over the instance’s GPUs, sampled every 15 s)',
            xLabel: time.label,
            yLabel: 'GPU utilisation (%)',
            xDomain: time.domain,
            yDomain: [0, 100],
            series: [{ label: 'GPU utilisation', colour: '#6a3d9a', dash: '', runs }],
          });
  return html`<section id="gpu"><h2>GPU utilisation</h2>${body}</section>`;
}

function attemptsTable(attempts: readonly AttemptRecord[]): Raw {
  if (attempts.length === 0) return note('No attempts: the job never reached Batch.', 'no-attempts');
  const rows = attempts.map((a) => {
    const seconds =
      a.startedAt !== undefined && a.stoppedAt !== undefined ? (a.stoppedAt - a.startedAt) / 1000 : undefined;
    const price =
      a.usdPerHour !== undefined ? `${usd(a.usdPerHour, 4)}/h${a.nodes > 1 ? ` × ${a.nodes} nodes` : ''}` : '—';
    const outcome = a.outcome
      ? html`<strong>${a.outcome.kind}</strong>${a.outcome.exitCode !== undefined ? ` (exit ${a.outcome.exitCode})` : ''}: ${a.outcome.reason}`
      : html`${a.status}`;
    const own = html`<tr><td>${a.attempt}</td><td>${a.capacity}</td><td>${a.startedAt !== undefined ? utc(a.startedAt) : '—'}</td><td>${a.stoppedAt !== undefined ? utc(a.stoppedAt) : '—'}</td><td>${seconds !== undefined ? duration(seconds) : '—'}</td><td>${price}</td><td>${a.costUsd !== undefined ? usd(a.costUsd, 4) : '—'}</td><td>${outcome}</td></tr>`;
    const orphans = orphanRunsOf(a).map(
      (run) =>
        html`<tr class="orphan"><td>${a.attempt}</td><td>${run.capacity}</td><td>${utc(run.startedAt)}</td><td>${utc(run.stoppedAt)}</td><td>${duration((run.stoppedAt - run.startedAt) / 1000)}</td><td>${usd(run.usdPerHour, 4)}/h</td><td>${usd(run.costUsd, 4)}</td><td><strong>orphaned Batch job</strong> ${run.batchJobId}: ran under this attempt’s name, stopped by Trainyard, billed to the job</td></tr>`,
    );
    return join([own, ...orphans], '\n');
  });
  return html`<table><thead><tr><th>#</th><th>capacity</th><th>start</th><th>stop</th><th>duration</th><th>price</th><th>cost</th><th>outcome</th></tr></thead><tbody>${join(rows, '\n')}</tbody></table>`;
}

function decisionsTable(decisions: readonly DecisionRecord[]): Raw {
  if (decisions.length === 0) return note('No decisions were recorded.', 'no-decisions');
  const rows = [...decisions]
    .sort((a, b) => a.seq - b.seq)
    .map(
      (d) =>
        html`<tr><td>${d.seq}</td><td>${utc(Date.parse(d.at))}</td><td>${d.moment}</td><td>${d.decision}</td><td>${d.reason}</td></tr>`,
    );
  return html`<table><thead><tr><th>#</th><th>at</th><th>moment</th><th>decision</th><th>reason</th></tr></thead><tbody>${join(rows, '\n')}</tbody></table>`;
}

const STYLESHEET = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:#1b1b1b;margin:24px auto;max-width:1000px;padding:0 16px}
h1{font-size:20px;margin:0 0 12px}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
code{font:13px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;word-break:break-all}
.state{font-size:13px;padding:2px 8px;border-radius:10px;background:#eee;vertical-align:middle}
.state-succeeded{background:#d8f0d8}.state-failed,.state-rejected{background:#f6d5d5}.state-cancelled{background:#f3ead0}
.facts{display:grid;grid-template-columns:max-content 1fr;gap:3px 16px;margin:0}.facts dt{color:#555}.facts dd{margin:0;white-space:pre-wrap}
.plot{margin:0}.plot figcaption{font-weight:600;margin-bottom:4px}.plot svg{max-width:100%;height:auto}
.legend{list-style:none;padding:0;margin:0 0 4px;display:flex;flex-wrap:wrap;gap:4px 18px;font-size:13px}
.swatch{vertical-align:middle}
.grid{stroke:#e6e6e6}.axis{stroke:#444}.tick{font-size:11px;fill:#444}.label{font-size:12px;fill:#222}
.marker line,.marker-swatch{stroke:#555;stroke-width:1.5;stroke-dasharray:4 3}.marker text{font-size:10px;fill:#555}
.marker.reclaim line,.marker-swatch.reclaim{stroke:#b2182b;stroke-dasharray:none}.marker.reclaim text{fill:#b2182b;font-weight:600}
.note,.empty{color:#555;font-size:13px}.empty{padding:16px;border:1px dashed #bbb;background:#fafafa}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{border-bottom:1px solid #e3e3e3;padding:4px 6px;text-align:left;vertical-align:top}
td{white-space:pre-wrap}th{background:#f4f4f4}
footer{margin-top:28px;color:#666;font-size:12px}
`;
