import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { PLATFORM_METRICS } from '../../lambdas/domain/platform-metrics';
import { resourcesOf, type Synthesized, synthesize, TWO_TEAM_CONFIG } from './synth';

interface Widget {
  type: string;
  properties: {
    title?: string;
    markdown?: string;
    metrics?: unknown[][];
    alarms?: string[];
    annotations?: { horizontal?: Array<{ value: number; label: string }> };
  };
}

/**
 * The dashboard body as CloudWatch receives it: the template joins literal JSON with references (ARNs, the region),
 * each of which is put back here as `@@<n>@@`, with `tokens[n]` the reference.
 */
function dashboardOf(s: Synthesized): { name: unknown; widgets: Widget[]; tokens: unknown[] } {
  const dashboards = resourcesOf(s.platformTemplate, 'AWS::CloudWatch::Dashboard');
  expect(dashboards).toHaveLength(1);
  const [, props] = dashboards[0] as [string, Record<string, unknown>];
  const tokens: unknown[] = [];
  const joined = (props.DashboardBody as { 'Fn::Join': [string, unknown[]] })['Fn::Join'][1]
    .map((part) => {
      if (typeof part === 'string') return part;
      tokens.push(part);
      return `@@${tokens.length - 1}@@`;
    })
    .join('');
  return { name: props.DashboardName, widgets: (JSON.parse(joined) as { widgets: Widget[] }).widgets, tokens };
}

function widget(widgets: Widget[], title: string): Widget {
  const found = widgets.find((w) => w.properties.title === title);
  if (!found) throw new Error(`no widget "${title}"; widgets: ${widgets.map((w) => w.properties.title).join(', ')}`);
  return found;
}

/** A Trainyard metric row of a widget as { metric, dimensions, stat }. */
function trainyardSeries(w: Widget): Array<{ metric: unknown; dimensions: Record<string, unknown>; stat: unknown }> {
  return (w.properties.metrics ?? [])
    .filter((row) => row[0] === 'Trainyard')
    .map((row) => {
      const options = row.at(-1) as { stat: unknown };
      const pairs = row.slice(2, -1);
      const dimensions: Record<string, unknown> = {};
      for (let i = 0; i < pairs.length; i += 2) dimensions[pairs[i] as string] = pairs[i + 1];
      return { metric: row[1], dimensions, stat: options.stat };
    });
}

describe('operations dashboard', () => {
  let s: Synthesized;
  let board: ReturnType<typeof dashboardOf>;
  beforeAll(() => {
    s = synthesize();
    board = dashboardOf(s);
  });

  it('is named after the deployment and linked from a stack output', () => {
    expect(board.name).toBe('trainyard-operations');
    const outputs = s.platformTemplate.findOutputs('DashboardUrl');
    expect(JSON.stringify(outputs)).toContain('#dashboards/dashboard/trainyard-operations');
  });

  it('graphs each team’s spend rate and budget used, with the warn and block lines of the config', () => {
    expect(trainyardSeries(widget(board.widgets, 'Spend rate by team, USD/h'))).toEqual([
      { metric: 'SpendRate', dimensions: { Team: 'nlp' }, stat: 'Maximum' },
      { metric: 'SpendRate', dimensions: { Team: 'vision' }, stat: 'Maximum' },
    ]);
    const budget = widget(board.widgets, 'Budget used this month by team, %');
    expect(trainyardSeries(budget).map((m) => m.dimensions.Team)).toEqual(['nlp', 'vision']);
    expect(budget.properties.annotations?.horizontal?.map(({ value, label }) => [label, value])).toEqual([
      ['warn', 70],
      ['block', 100],
    ]);
  });

  it('graphs spot seen for the tiers the watch probes, and interruptions for every tier that allows spot', () => {
    expect(
      trainyardSeries(widget(board.widgets, 'Spot capacity seen by the probe (1 = available)')).map((m) => [
        m.dimensions.Tier,
        m.stat,
      ]),
    ).toEqual([
      ['gpu-small', 'Minimum'],
      ['gpu-medium', 'Minimum'],
      ['gpu-large', 'Minimum'],
    ]);
    const spotTiers = s.config.tiers.filter((t) => t.spotAllowed).map((t) => t.id);
    expect(spotTiers).not.toContain('gpu-multinode');
    expect(spotTiers).toContain('cpu-small');
    const spot = trainyardSeries(widget(board.widgets, 'Spot reclaims and warnings per hour, by tier'));
    // Reclaims on every spot tier; warnings on the EC2 ones only (Fargate Spot sends none).
    expect(spot.filter((m) => m.metric === 'SpotReclaims').map((m) => m.dimensions.Tier)).toEqual(spotTiers);
    expect(spot.filter((m) => m.metric === 'SpotInterruptions').map((m) => m.dimensions.Tier)).toEqual(
      spotTiers.filter((tier) => tier.startsWith('gpu-')),
    );
  });

  it('reads every Trainyard metric with the dimensions and statistic the catalogue gives it', () => {
    const series = board.widgets.flatMap(trainyardSeries);
    expect(new Set(series.map((m) => m.metric))).toEqual(new Set(Object.keys(PLATFORM_METRICS)));
    for (const m of series) {
      const spec = PLATFORM_METRICS[m.metric as keyof typeof PLATFORM_METRICS];
      expect(Object.keys(m.dimensions).sort(), String(m.metric)).toEqual([...spec.dimensions].sort());
      expect(m.stat, String(m.metric)).toBe(spec.statistic);
    }
  });

  it('graphs the errors of every Trainyard function and shows the state of every alarm in the stack', () => {
    const functions = resourcesOf(s.platformTemplate, 'AWS::Lambda::Function').filter(
      ([, p]) => (p.LoggingConfig as { LogFormat?: string } | undefined)?.LogFormat === 'JSON',
    );
    const errors = widget(board.widgets, 'Function errors per 5 minutes').properties.metrics ?? [];
    expect(errors.length).toBe(functions.length);
    expect(errors.map((row) => (row.at(-1) as { label: string }).label)).toEqual(
      expect.arrayContaining(['api', 'budget-watch', 'interruption', 'reports', 'finalize']),
    );

    const alarmIds = resourcesOf(s.platformTemplate, 'AWS::CloudWatch::Alarm').map(([id]) => id);
    expect(alarmIds.length).toBeGreaterThan(0);
    const shown = (widget(board.widgets, 'Alarms').properties.alarms ?? []).map((arn) => {
      const index = Number(/^@@(\d+)@@$/.exec(arn)?.[1]);
      return (board.tokens[index] as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
    });
    expect(shown.sort()).toEqual(alarmIds.sort());
  });

  it('is left out when observability.dashboard is off', () => {
    const off = synthesize({ ...TWO_TEAM_CONFIG, observability: { dashboard: false } });
    expect(resourcesOf(off.platformTemplate, 'AWS::CloudWatch::Dashboard')).toEqual([]);
    expect(off.platformTemplate.findOutputs('DashboardUrl')).toEqual({});
  });

  it('says so on the dashboard when platform metrics are off', () => {
    const quiet = dashboardOf(synthesize({ ...TWO_TEAM_CONFIG, observability: { platformMetrics: false } }));
    expect(quiet.widgets[0]?.properties.markdown).toContain(
      "Platform metrics are off (`observability.platformMetrics`), so the graphs of the first two rows stay empty, but for job executions per hour (the state machine's own metrics).",
    );
    expect(board.widgets[0]?.properties.markdown).not.toContain('Platform metrics are off');
  });
});

describe('docs/operations.md', () => {
  it('has a row for every metric of the catalogue, with its dimensions, unit, statistic, emitter and a meaning', () => {
    const doc = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
    const rows = doc
      .split('\n')
      .filter((line) => /^\| `[A-Za-z]+` \|/.test(line))
      .map((line) => line.split(' | ').map((cell) => cell.replace(/^\| |\s*\|$/g, '')));
    expect(rows.map((cells) => cells.slice(0, 5))).toEqual(
      Object.entries(PLATFORM_METRICS).map(([name, spec]) => [
        `\`${name}\``,
        spec.dimensions.length === 0 ? '—' : spec.dimensions.map((d) => `\`${d}\``).join(', '),
        spec.unit,
        spec.statistic,
        spec.emitter,
      ]),
    );
    for (const cells of rows) expect(cells[5]?.length, cells[0]).toBeGreaterThan(20);
  });
});
