import { Duration, Stack } from 'aws-cdk-lib';
import type * as apigwv2 from 'aws-cdk-lib/aws-apigatewayv2';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { compareCodeUnits } from '../../lambdas/domain/code-unit-order';
import { METRICS_NAMESPACE, PLATFORM_METRICS, type PlatformMetricName } from '../../lambdas/domain/platform-metrics';
import { keepsTierSpotRecord } from '../../lambdas/domain/watch';
import type { TrainyardConfig } from '../config';
import { TrainyardFunction } from '../function';

/** Props for the operations dashboard. */
export interface OperationsDashboardProps {
  readonly config: TrainyardConfig;
  /** The job lifecycle's state machine (its execution metrics). */
  readonly stateMachine: sfn.IStateMachine;
  /** The HTTP API (its 4xx, 5xx and latency). */
  readonly httpApi: apigwv2.IHttpApi;
  /** Name of the dashboard. */
  readonly dashboardName: string;
}

/** The period of the budget watch, and so of every gauge it publishes. */
const GAUGE_PERIOD = Duration.minutes(5);
/** The period counts are summed over. */
const COUNT_PERIOD = Duration.hours(1);

/** A Trainyard metric as the catalogue defines it, read with the statistic the catalogue names. */
export function platformMetric(
  name: PlatformMetricName,
  dimensions: Record<string, string> = {},
  options: { label?: string; period?: Duration } = {},
): cloudwatch.Metric {
  const spec = PLATFORM_METRICS[name];
  return new cloudwatch.Metric({
    namespace: METRICS_NAMESPACE,
    metricName: name,
    dimensionsMap: dimensions,
    statistic: spec.statistic,
    period: options.period ?? (spec.statistic === 'Sum' ? COUNT_PERIOD : GAUGE_PERIOD),
    ...(options.label ? { label: options.label } : {}),
  });
}

/** A third-of-a-row graph whose left axis starts at 0 (counts, dollars, percentages). */
function graph(
  title: string,
  left: cloudwatch.IMetric[],
  options: Omit<cloudwatch.GraphWidgetProps, 'title' | 'left' | 'width'> = {},
): cloudwatch.GraphWidget {
  return new cloudwatch.GraphWidget({
    title,
    width: 8,
    left,
    leftYAxis: { min: 0, showUnits: false },
    ...options,
  });
}

/**
 * The CloudWatch dashboard an operator opens first: what runs and waits, what it costs per team against budgets,
 * spot capacity and reclaims per tier (Trainyard's own metrics, domain/platform-metrics.ts), then the control
 * plane's health (AWS's metrics of every Trainyard function, the state machine and the HTTP API) and the state of
 * every alarm in the stack. Create it last in its stack: it graphs every Trainyard function and alarm defined
 * before it.
 */
export class OperationsDashboard extends Construct {
  public readonly dashboard: cloudwatch.Dashboard;

  constructor(scope: Construct, id: string, props: OperationsDashboardProps) {
    super(scope, id);
    const { config } = props;
    const stack = Stack.of(this);
    const constructs = stack.node.findAll();
    const functions = constructs
      .filter((c): c is TrainyardFunction => c instanceof TrainyardFunction)
      .sort((a, b) => compareCodeUnits(a.handlerName, b.handlerName));
    const alarms = constructs.filter((c): c is cloudwatch.Alarm => c instanceof cloudwatch.Alarm);
    const teams = config.teams.map((t) => t.id);
    const spotTiers = config.tiers.filter((t) => t.spotAllowed).map((t) => t.id);
    const ec2SpotTiers = config.tiers.filter((t) => t.spotAllowed && t.kind === 'gpu').map((t) => t.id);
    const probedTiers = config.tiers.filter(keepsTierSpotRecord).map((t) => t.id);
    const percent = (fraction: number) => Math.round(fraction * 10_000) / 100;
    const machine = props.stateMachine;
    const metricsNote = config.observability.platformMetrics
      ? ''
      : " Platform metrics are off (`observability.platformMetrics`), so the graphs of the first two rows stay empty, but for job executions per hour (the state machine's own metrics).";

    this.dashboard = new cloudwatch.Dashboard(this, 'Dashboard', {
      dashboardName: props.dashboardName,
      defaultInterval: Duration.days(1),
      widgets: [
        [
          new cloudwatch.TextWidget({
            width: 24,
            height: 2,
            markdown: [
              '# Trainyard operations',
              `Jobs, spend and spot capacity come from Trainyard's own metrics (namespace \`${METRICS_NAMESPACE}\`: every 5 minutes from the budget watch, spot warnings and reclaims as they are recorded); the rest is AWS's metrics of the control plane. What each metric means, and what to do when an alarm fires: docs/operations.md.${metricsNote}`,
            ].join('\n\n'),
          }),
        ],
        [
          graph('Jobs running and waiting', [
            platformMetric('RunningJobs', { Capacity: 'spot' }, { label: 'running on spot' }),
            platformMetric('RunningJobs', { Capacity: 'on-demand' }, { label: 'running on on-demand' }),
            platformMetric('WaitingJobs', {}, { label: 'waiting' }),
          ]),
          graph(
            'Job executions per hour',
            (
              [
                ['started', machine.metricStarted],
                ['succeeded', machine.metricSucceeded],
                ['failed', machine.metricFailed],
                ['aborted', machine.metricAborted],
                ['timed out', machine.metricTimedOut],
              ] as const
            ).map(([label, metric]) =>
              metric.call(machine, { label, period: COUNT_PERIOD, statistic: cloudwatch.Stats.SUM }),
            ),
          ),
          // Every spot tier's reclaims; warnings only on the EC2 tiers (Fargate Spot, the CPU tiers', sends none).
          graph('Spot reclaims and warnings per hour, by tier', [
            ...spotTiers.map((tier) => platformMetric('SpotReclaims', { Tier: tier }, { label: `${tier} reclaimed` })),
            ...ec2SpotTiers.map((tier) =>
              platformMetric('SpotInterruptions', { Tier: tier }, { label: `${tier} warned` }),
            ),
          ]),
        ],
        [
          graph(
            'Spend rate by team, USD/h',
            teams.map((team) => platformMetric('SpendRate', { Team: team }, { label: team })),
            { stacked: true },
          ),
          graph(
            'Budget used this month by team, %',
            teams.map((team) => platformMetric('BudgetUsed', { Team: team }, { label: team })),
            {
              leftAnnotations: [
                { value: percent(config.budgets.warnThreshold), label: 'warn', color: cloudwatch.Color.ORANGE },
                { value: percent(config.budgets.blockThreshold), label: 'block', color: cloudwatch.Color.RED },
              ],
            },
          ),
          graph(
            'Spot capacity seen by the probe (1 = available)',
            probedTiers.map((tier) => platformMetric('SpotAvailable', { Tier: tier }, { label: tier })),
            { leftYAxis: { min: 0, max: 1, showUnits: false } },
          ),
        ],
        [
          graph(
            'Function errors per 5 minutes',
            functions.map((fn) =>
              fn.metricErrors({ label: fn.handlerName, period: GAUGE_PERIOD, statistic: cloudwatch.Stats.SUM }),
            ),
          ),
          graph(
            'Function duration p99, ms',
            functions.map((fn) =>
              fn.metricDuration({ label: fn.handlerName, period: GAUGE_PERIOD, statistic: cloudwatch.Stats.p(99) }),
            ),
          ),
          graph(
            'HTTP API',
            [
              props.httpApi.metricClientError({ label: '4xx', period: GAUGE_PERIOD, statistic: cloudwatch.Stats.SUM }),
              props.httpApi.metricServerError({ label: '5xx', period: GAUGE_PERIOD, statistic: cloudwatch.Stats.SUM }),
            ],
            {
              right: [
                props.httpApi.metricLatency({
                  label: 'latency p99, ms',
                  period: GAUGE_PERIOD,
                  statistic: cloudwatch.Stats.p(99),
                }),
              ],
              rightYAxis: { min: 0, showUnits: false },
            },
          ),
        ],
        [
          new cloudwatch.AlarmStatusWidget({
            title: 'Alarms',
            width: 24,
            alarms,
            sortBy: cloudwatch.AlarmStatusWidgetSortBy.STATE_UPDATED_TIMESTAMP,
          }),
        ],
      ],
    });
  }
}
