// The job report renderer on hand-made records. Costs are worked out by hand: price × hours.
import { describe, expect, it } from 'vitest';
import type { AttemptRecord, DecisionRecord, JobRecord } from '../../lambdas/domain/job';
import {
  costCurve,
  downsample,
  type JobReportInput,
  MAX_PLOT_POINTS,
  renderJobReport,
} from '../../lambdas/domain/job-report';
import { attemptRecord, JOB_ID, jobRecord } from '../support/records';

const H = 3_600_000;
const T0 = Date.UTC(2026, 10, 20, 9, 0, 0);
function job(overrides: Partial<JobRecord> = {}): JobRecord {
  return jobRecord({
    team: 'nlp',
    project: 'shakespeare',
    state: 'SUCCEEDED',
    reason: 'succeeded',
    createdAt: new Date(T0).toISOString(),
    command: ['python', 'train.py', 'config/train_shakespeare_char.py'],
    counters: { attempts: 3, reclaims: 2, capacityCancellations: 0, appErrors: 0, infraErrors: 0, resumeFailures: 0 },
    costSoFarUsd: 1.26,
    bundle: { key: `teams/nlp/jobs/${JOB_ID}/code.tar.gz`, bytes: 1024, sha256: 'a'.repeat(64) },
    ...overrides,
  });
}

function attempt(n: number, overrides: Partial<AttemptRecord>): AttemptRecord {
  return attemptRecord({ attempt: n, status: 'FAILED', ...overrides });
}

const reclaimed = (instance: string) => ({
  kind: 'reclaimed' as const,
  reason: `Host EC2 (instance ${instance}) terminated.`,
  resumable: true,
});

// Spot 0.1 h → 2.1 h at $0.19/h: $0.38. Spot 2.3 h → 2.8 h: $0.095. On-demand 3.0 h → 4.5 h at $0.526/h: $0.789.
// Total $1.264, settled as $1.26.
const ATTEMPTS: AttemptRecord[] = [
  attempt(1, {
    startedAt: T0 + 0.1 * H,
    stoppedAt: T0 + 2.1 * H,
    usdPerHour: 0.19,
    costUsd: 0.38,
    outcome: reclaimed('i-0aaa'),
  }),
  attempt(2, {
    startedAt: T0 + 2.3 * H,
    stoppedAt: T0 + 2.8 * H,
    usdPerHour: 0.19,
    costUsd: 0.095,
    outcome: reclaimed('i-0bbb'),
  }),
  attempt(3, {
    capacity: 'on-demand',
    queue: 'trainyard-gpu-small-on-demand',
    status: 'SUCCEEDED',
    startedAt: T0 + 3 * H,
    stoppedAt: T0 + 4.5 * H,
    usdPerHour: 0.526,
    costUsd: 0.789,
    outcome: { kind: 'succeeded', reason: 'Essential container in task exited', exitCode: 0, resumable: false },
  }),
];

const DECISIONS: DecisionRecord[] = [
  { seq: 1, at: new Date(T0).toISOString(), moment: 'submit', decision: 'run-attempt spot', reason: 'no deadline' },
  {
    seq: 2,
    at: new Date(T0 + 2.1 * H).toISOString(),
    moment: 'attempt-reclaimed',
    decision: 'run-attempt spot',
    reason: 'reclaim 1 of 2 before on-demand',
  },
];

function input(overrides: Partial<JobReportInput> = {}): JobReportInput {
  return {
    job: job(),
    attempts: ATTEMPTS,
    decisions: DECISIONS,
    costUsd: 1.26,
    finishedAt: new Date(T0 + 4.6 * H).toISOString(),
    ...overrides,
  };
}

/** One metrics.jsonl line as the harness writes it. */
function sample(ms: number, fields: Record<string, unknown>): string {
  return JSON.stringify({ time: new Date(ms).toISOString(), ...fields });
}

/** The point lists of a series' polylines, in document order. */
function polylines(html: string, series: string): Array<Array<[number, number]>> {
  const pattern = new RegExp(`<polyline data-series="${series}" points="([^"]*)"`, 'g');
  return [...html.matchAll(pattern)].map((m) =>
    (m[1] ?? '').split(' ').map((pair) => pair.split(',').map(Number) as [number, number]),
  );
}

describe('renderJobReport: a self-contained, escaped document', () => {
  const hostile = '<script>alert("x")</script>';
  const html = renderJobReport(
    input({
      job: job({
        project: hostile,
        reason: `failed: <img src=x onerror=alert(1)> & "quoted"`,
        command: ['python', '-c', `print('${hostile}')`],
        user: '<b>mallory</b>',
        estimate: { costUsd: 1, runtimeSeconds: 3 * 3600, confidence: 'low', basis: `${hostile} basis` },
      }),
      attempts: [attempt(1, { ...ATTEMPTS[0], outcome: { ...reclaimed('i-0aaa'), reason: `reclaimed ${hostile}` } })],
      decisions: [{ ...(DECISIONS[0] as DecisionRecord), reason: hostile, decision: '<i>run</i>' }],
      metricsLog: [
        sample(T0 + H, { attempt: 1, step: 1, loss: hostile }),
        sample(T0 + H, { attempt: 1, step: 2, loss: 2, [hostile]: hostile }),
      ].join('\n'),
    }),
  );

  it('contains no markup from the records: no script, img or b element, no event handler attribute', () => {
    expect(html.toLowerCase()).not.toContain('<script');
    expect(html).not.toContain('<img');
    expect(html).not.toContain('<b>');
    expect(html).not.toContain('<i>run');
    expect(html).not.toMatch(/<[^>]*\sonerror=/i);
  });

  it('shows the hostile values as text', () => {
    expect(html).toContain('&#60;script&#62;alert(&#34;x&#34;)&#60;/script&#62;');
    expect(html).toContain('failed: &#60;img src=x onerror=alert(1)&#62; &#38; &#34;quoted&#34;');
    expect(html).toContain('&#60;b&#62;mallory&#60;/b&#62;');
    expect(html).toContain('reclaimed &#60;script&#62;');
    expect(html).toContain('&#60;i&#62;run&#60;/i&#62;');
  });

  it('loads nothing: a policy forbidding scripts and fetches, no src or href, no URL but the SVG namespace', () => {
    expect(html).toContain(
      `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">`,
    );
    expect(html).not.toMatch(/<[^>]*\s(src|href)=/);
    const urls = html.match(/[a-z]+:\/\/[^\s"'<]*/g) ?? [];
    expect(new Set(urls)).toEqual(new Set(['http://www.w3.org/2000/svg']));
  });
});

describe('renderJobReport: header', () => {
  it('states the job, its outcome and its figures, estimate against actual', () => {
    const html = renderJobReport(
      input({ job: job({ estimate: { costUsd: 1, runtimeSeconds: 3 * 3600, confidence: 'medium', basis: 'b' } }) }),
    );

    const facts = Object.fromEntries(
      [...html.matchAll(/<dt>([^<]*)<\/dt><dd>(.*?)<\/dd>/g)].map((m) => [m[1], m[2]?.replace(/<[^>]+>/g, '')]),
    );
    expect(facts).toMatchObject({
      Job: JOB_ID,
      Team: 'nlp',
      User: 'alice',
      Project: 'shakespeare',
      Tier: 'gpu-small',
      'Final state': 'SUCCEEDED',
      Reason: 'succeeded',
      Submitted: '2026-11-20 09:00:00 UTC',
      Finished: '2026-11-20 13:36:00 UTC',
      'Total cost': '$1.26',
      Attempts: '3',
      'Spot reclaims': '2',
      'On-demand fallbacks': '1',
      // 2 h + 0.5 h + 1.5 h of attempts.
      'Compute time (all attempts)': '4 h 00 min',
      'Cost: estimate → actual': '$1.00 → $1.26 (+26 %)',
      'Runtime: estimate → actual': '3 h 00 min → 4 h 00 min (+33 %)',
    });
  });

  it('lists the job’s labels in key order, and a dash for a job without labels', () => {
    const labelled = renderJobReport(input({ job: job({ labels: { sweep: 'cli-1', lr: '3e-4' } }) }));
    const plain = renderJobReport(input({ job: job({ labels: undefined }) }));

    expect(labelled).toContain('<dt>Labels</dt><dd>lr=3e-4 sweep=cli-1</dd>');
    expect(plain).toContain('<dt>Labels</dt><dd>—</dd>');
  });

  it('says so when the job has no estimate', () => {
    const html = renderJobReport(input({ job: job({ estimate: undefined }) }));

    expect(html).toContain('<dt>Estimate</dt><dd>none recorded (the job ended before the cost gate)</dd>');
  });
});

describe('costCurve', () => {
  const from = T0;
  const to = T0 + 4.6 * H;

  it('ends at the sum of the attempts’ costs: $0.38 + $0.095 + $0.789 = $1.264', () => {
    const curve = costCurve(ATTEMPTS, from, to);

    const last = curve.stretches.at(-1)?.points.at(-1);
    expect(last).toEqual({ atMs: to, usd: 1.264 });
    expect(curve.totalUsd).toBe(1.264);
  });

  it('accrues each attempt linearly between its start and stop', () => {
    const points = costCurve(ATTEMPTS, from, to).stretches.flatMap((s) => s.points);
    const at = (ms: number) => points.find((p) => p.atMs === ms)?.usd;

    expect(at(T0 + 0.1 * H)).toBe(0);
    expect(at(T0 + 2.1 * H)).toBeCloseTo(0.38, 12);
    expect(at(T0 + 2.3 * H)).toBeCloseTo(0.38, 12); // nothing accrues between attempts
    expect(at(T0 + 2.8 * H)).toBeCloseTo(0.475, 12);
    expect(at(T0 + 4.5 * H)).toBeCloseTo(1.264, 12);
  });

  it('splits the curve by the capacity that accrues, with the waits between attempts apart', () => {
    const kinds = costCurve(ATTEMPTS, from, to).stretches.map((s) => s.kind);

    expect(kinds).toEqual(['none', 'spot', 'none', 'spot', 'none', 'on-demand', 'none']);
  });

  it('meters an attempt without a recorded cost from its price and times (1.5 h × $0.526 = $0.789)', () => {
    const unrecorded = ATTEMPTS.map((a) => (a.attempt === 3 ? { ...a, costUsd: undefined } : a));

    expect(costCurve(unrecorded, from, to).totalUsd).toBe(1.264);
  });

  it('accrues an orphaned Batch job over its own run, on its own capacity', () => {
    // Attempt 2's orphan ran on on-demand in the wait before attempt 3 (2.8 h → 2.9 h) for $0.05.
    const run = { capacity: 'on-demand', startedAt: T0 + 2.8 * H, stoppedAt: T0 + 2.9 * H, usdPerHour: 0.5 } as const;
    const withOrphan = ATTEMPTS.map((a) =>
      a.attempt === 2 ? { ...a, orphans: { 'b-9': { ...run, costUsd: 0.05 } } } : a,
    );

    const curve = costCurve(withOrphan, from, to);

    expect(curve.totalUsd).toBeCloseTo(1.314, 12);
    expect(curve.stretches.map((s) => s.kind)).toEqual([
      'none',
      'spot',
      'none',
      'spot',
      'on-demand',
      'none',
      'on-demand',
      'none',
    ]);
    const points = curve.stretches.flatMap((s) => s.points);
    expect(points.find((p) => p.atMs === T0 + 2.85 * H)).toBeUndefined();
    expect(points.find((p) => p.atMs === T0 + 2.9 * H)?.usd).toBeCloseTo(0.525, 12);
  });

  it('leaves out an attempt that never started and cost nothing', () => {
    const starved = attempt(4, { stoppedAt: T0 + 4.55 * H, outcome: undefined });

    const curve = costCurve([...ATTEMPTS, starved], from, to);

    expect(curve.totalUsd).toBe(1.264);
    expect(curve.stretches.map((s) => s.kind)).toEqual(['none', 'spot', 'none', 'spot', 'none', 'on-demand', 'none']);
  });
});

describe('renderJobReport: cost plot', () => {
  it('marks each reclaimed attempt with a labelled vertical line, and no marker for the one that succeeded', () => {
    const html = renderJobReport(input());

    const markers = [...html.matchAll(/<g class="marker[^"]*" data-outcome="([^"]+)" data-attempt="(\d+)">/g)];
    expect(markers.map((m) => [m[1], m[2]])).toEqual([
      ['reclaimed', '1'],
      ['reclaimed', '2'],
    ]);
    expect(html).toContain('>#1 reclaimed</text>');
    expect(html).toContain('>#2 reclaimed</text>');
  });

  it('marks other interruptions too, told apart from reclaims', () => {
    const moved = attempt(2, {
      ...ATTEMPTS[1],
      outcome: { kind: 'moved', reason: 'moved to on-demand', resumable: true, moveTo: 'on-demand' },
    });

    const html = renderJobReport(
      input({ attempts: [ATTEMPTS[0] as AttemptRecord, moved, ATTEMPTS[2] as AttemptRecord] }),
    );

    expect(html).toContain('<g class="marker reclaim" data-outcome="reclaimed" data-attempt="1">');
    expect(html).toContain('<g class="marker" data-outcome="moved" data-attempt="2">');
  });

  it('keeps on its axes an orphan that stopped after the job ended, its cost included', () => {
    // Attempt 3's orphan ran on on-demand from 4.0 h to 6.0 h at $0.50 an hour ($1.00), past the end at 4.6 h.
    const run = { capacity: 'on-demand', startedAt: T0 + 4 * H, stoppedAt: T0 + 6 * H, usdPerHour: 0.5 } as const;
    const withOrphan = ATTEMPTS.map((a) =>
      a.attempt === 3 ? { ...a, orphans: { 'b-late': { ...run, costUsd: 1 } } } : a,
    );

    const html = renderJobReport(input({ attempts: withOrphan, costUsd: 2.26 }));

    // The plot area ends at x = 760 − 20 (the SVG's width less its right margin); every point of the cost lines lies
    // inside it, the last one at its right edge.
    const points = [...polylines(html, 'spot'), ...polylines(html, 'on-demand'), ...polylines(html, 'none')].flat();
    expect(Math.max(...points.map(([x]) => x))).toBeCloseTo(740, 6);
  });

  it('draws spot and on-demand stretches with their own dash pattern, each in the legend', () => {
    const html = renderJobReport(input());

    const spot = polylines(html, 'spot');
    const onDemand = polylines(html, 'on-demand');
    expect(spot).toHaveLength(2);
    expect(onDemand).toHaveLength(1);
    expect(html).toMatch(/<polyline data-series="spot" [^>]*stroke-dasharray="7 4"/);
    expect(html).not.toMatch(/<polyline data-series="on-demand" [^>]*stroke-dasharray/);
    expect(html).toMatch(/<ul class="legend">.*spot<\/li>.*on-demand<\/li>/);
    expect(html).toContain('Cumulative cost: $1.26 over 3 attempt(s)');
  });

  it('labels both axes with units and ticks', () => {
    const html = renderJobReport(input());
    const cost = html.slice(html.indexOf('id="plot-cost"'), html.indexOf('id="gpu"'));

    expect(cost).toContain('>time since submission (h)</text>');
    expect(cost).toContain('>cumulative cost (USD)</text>');
    expect(cost).toContain('>$0.00</text>');
    expect(cost).toContain('>$0.25</text>');
    expect(cost).toContain('>$1.50</text>');
    expect(cost).toContain('>4</text>');
  });
});

describe('renderJobReport: samples', () => {
  it('plots loss over step and GPU utilisation, one GPU line per attempt', () => {
    const log = [
      ...[0, 1, 2].map((i) =>
        sample(T0 + (0.2 + i * 0.1) * H, { attempt: 1, step: i * 100, loss: 3 - i, gpu_util: 90 }),
      ),
      ...[3, 4].map((i) =>
        sample(T0 + (3 + i * 0.1) * H, { attempt: 3, step: i * 100, loss: 3 - i / 2, gpu_util: 95 }),
      ),
    ].join('\n');

    const html = renderJobReport(input({ metricsLog: log }));

    expect(polylines(html, 'loss')).toHaveLength(1);
    expect(polylines(html, 'loss')[0]).toHaveLength(5);
    expect(html).toContain('>training step</text>');
    expect(polylines(html, 'GPU utilisation').map((line) => line.length)).toEqual([3, 2]);
    expect(html).toContain('>GPU utilisation (%)</text>');
    expect(html).not.toContain('id="no-gpu"');
  });

  it.each([
    ['a loss levelled off in float noise', [0.3, 0.1 + 0.2]],
    ['losses apart by less than the spacing of doubles there', [1e20, 1e20 + 16384]],
  ])('draws %s as one value, with a bounded set of ticks', (_case, losses) => {
    // The y axis's step once fell below the spacing of doubles at the data's magnitude: `v += step` never moved, and
    // filling the tick list ran the renderer (Finalize, its final event and report with it) out of memory.
    const log = losses
      .map((loss, i) => sample(T0 + H + i * 1000, { attempt: 1, step: (i + 1) * 100, loss }))
      .join('\n');

    const html = renderJobReport(input({ metricsLog: log }));

    expect(polylines(html, 'loss')[0]).toHaveLength(2);
    const lossPlot = html.slice(html.indexOf('>loss</text>') - 20_000, html.indexOf('>loss</text>'));
    const yTicks = lossPlot.match(/text-anchor="end">/g) ?? [];
    expect(yTicks.length).toBeGreaterThan(1);
    expect(yTicks.length).toBeLessThanOrEqual(20);
  });

  it('draws each loss field as its own series, in the legend, and a lone value as a dot', () => {
    const log = [
      sample(T0 + H, { attempt: 1, step: 100, loss: 3 }),
      sample(T0 + H + 1000, { attempt: 1, step: 200, loss: 2.5 }),
      sample(T0 + H + 2000, { attempt: 1, step: 250, train_loss: 2.4, val_loss: 2.6 }),
    ].join('\n');

    const html = renderJobReport(input({ metricsLog: log }));

    expect(polylines(html, 'loss')[0]).toHaveLength(2);
    expect(html).toMatch(/<circle data-series="train loss" cx="[\d.]+" cy="[\d.]+" r="3"/);
    expect(html).toMatch(/<circle data-series="validation loss" cx="[\d.]+" cy="[\d.]+" r="3"/);
    expect(html).toMatch(/<ul class="legend">.*> loss<\/li>.*> train loss<\/li>.*> validation loss<\/li>/);
  });

  it('keeps the redone steps of a resumed attempt, not the ones it threw away', () => {
    // Attempt 1 reaches step 300; attempt 2 resumes from the checkpoint at step 200 and goes on to 400.
    const first = Array.from({ length: 31 }, (_, i) =>
      sample(T0 + H + i * 1000, { attempt: 1, step: i * 10, loss: 1 }),
    );
    const second = Array.from({ length: 21 }, (_, i) =>
      sample(T0 + 2.5 * H + i * 1000, { attempt: 2, step: 200 + i * 10, loss: 2 }),
    );

    const html = renderJobReport(input({ metricsLog: [...first, ...second].join('\n') }));

    const [line] = polylines(html, 'loss');
    // Steps 0..190 of attempt 1 (20) and 200..400 of attempt 2 (21).
    expect(line).toHaveLength(41);
    const xs = (line ?? []).map(([x]) => x);
    expect(xs).toEqual([...xs].sort((a, b) => a - b));
  });

  it('plots loss over time when the samples carry no step', () => {
    const log = [0, 1, 2].map((i) => sample(T0 + (1 + i) * H, { attempt: 1, loss: 2 - i / 2 })).join('\n');

    const html = renderJobReport(input({ metricsLog: log }));

    expect(html).toContain('Loss over time (the samples carry no step)');
    expect(polylines(html, 'loss')[0]).toHaveLength(3);
  });

  it('notes the missing samples instead of drawing empty charts, and still draws the cost', () => {
    const html = renderJobReport(input());

    expect(html).toContain('<p class="empty" id="no-loss">No loss samples');
    expect(html).toContain('<p class="empty" id="no-gpu">No GPU utilisation samples');
    expect(html).not.toContain('id="plot-loss"');
    expect(html).not.toContain('id="plot-gpu"');
    expect(html).toContain('id="plot-cost"');
    expect(html).toContain('no metrics.jsonl was written');
  });

  it('notes a GPU-less job (CPU tier) while plotting its loss', () => {
    const log = [0, 1].map((i) => sample(T0 + H + i * 1000, { attempt: 1, step: i, loss: 1 })).join('\n');

    const html = renderJobReport(input({ metricsLog: log }));

    expect(html).toContain('id="plot-loss"');
    expect(html).toContain('id="no-gpu"');
  });

  it('counts the malformed lines it skipped and plots the rest', () => {
    const log = [
      sample(T0 + H, { attempt: 1, step: 1, loss: 2 }),
      '{"time": "2026-11-20T10:00:01.000Z", "att',
      'Traceback (most recent call last):',
      '["not", "an", "object"]',
      sample(T0 + H + 1000, { attempt: 1, step: 2, loss: 1.5 }),
    ].join('\n');

    const html = renderJobReport(input({ metricsLog: log }));

    expect(html).toContain('metrics.jsonl: 2 samples, <span id="malformed-lines">3</span> malformed line(s) skipped');
    expect(polylines(html, 'loss')[0]).toHaveLength(2);
  });

  it('says why the samples were not read when the log was left out', () => {
    const html = renderJobReport(input({ metricsOmitted: 'it holds 80.0 MiB, more than the 64.0 MiB a report reads' }));

    expect(html).toContain('No loss plot: metrics.jsonl was not read (it holds 80.0 MiB');
    expect(html).toContain('metrics.jsonl not read: it holds 80.0 MiB');
  });
});

describe('downsampling', () => {
  it('keeps at most the bound, the first and last points and the extremes, in order', () => {
    const n = 1_000_000;
    const xs = Array.from({ length: n }, (_, i) => i);
    const ys = xs.map((i) => Math.sin(i / 1000));
    ys[123_457] = 50; // a spike
    ys[876_543] = -50; // a dip

    const out = downsample({ xs, ys }, MAX_PLOT_POINTS);

    expect(out.xs.length).toBeLessThanOrEqual(MAX_PLOT_POINTS);
    expect(out.xs.length).toBeGreaterThan(MAX_PLOT_POINTS - 10);
    expect([out.xs[0], out.xs.at(-1)]).toEqual([0, n - 1]);
    expect(out.xs).toContain(123_457);
    expect(out.xs).toContain(876_543);
    expect(Math.max(...out.ys)).toBe(50);
    expect(Math.min(...out.ys)).toBe(-50);
    expect(out.xs.every((x, i) => i === 0 || x > (out.xs[i - 1] as number))).toBe(true);
  });

  it('leaves a series within the bound as it is', () => {
    const series = { xs: [1, 2, 3], ys: [3, 1, 2] };

    expect(downsample(series, MAX_PLOT_POINTS)).toBe(series);
  });

  it('keeps a report of 300,000 samples small: every line within the bound, the document under 1 MB', () => {
    const n = 300_000;
    const lines: string[] = [];
    for (let i = 0; i < n; i++) {
      const ms = T0 + 0.1 * H + (i / n) * 4.4 * H;
      const attemptNo = ms < T0 + 2.1 * H ? 1 : ms < T0 + 2.8 * H ? 2 : 3;
      lines.push(sample(ms, { attempt: attemptNo, gpu_util: 50 + (i % 50), step: i, loss: 5 / (1 + i / 1000) }));
    }

    const html = renderJobReport(input({ metricsLog: Buffer.from(lines.join('\n')) }));

    const all = [...polylines(html, 'loss'), ...polylines(html, 'GPU utilisation')];
    expect(all.length).toBeGreaterThanOrEqual(4);
    for (const line of all) expect(line.length).toBeLessThanOrEqual(MAX_PLOT_POINTS);
    expect(polylines(html, 'GPU utilisation').reduce((sum, l) => sum + l.length, 0)).toBeLessThanOrEqual(
      MAX_PLOT_POINTS,
    );
    expect(Buffer.byteLength(html)).toBeLessThan(1_000_000);
  });
});
