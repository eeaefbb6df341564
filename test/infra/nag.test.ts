import { Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import { type Synthesized, synthesize } from './synth';

let s: Synthesized;
beforeAll(() => {
  s = synthesize();
});

function acknowledgements(root: IConstruct): Array<{ path: string; id: string; reason: string }> {
  return root.node.findAll().flatMap((c) =>
    c.node.metadata
      .filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
      .flatMap((m) => Object.entries(m.data as Record<string, string>))
      .filter(([id]) => id.includes('AwsSolutions'))
      // CDK stores acknowledgements keyed by source: `Annotation::<rule id>` for plugin findings.
      .map(([id, reason]) => ({ path: c.node.path, id: id.replace(/^Annotation::/, ''), reason })),
  );
}

describe('cdk-nag AwsSolutions', () => {
  it('reports no unacknowledged findings on the stateful stack', () => {
    expect(new AwsSolutionsChecks().validateScope(s.stateful).violations).toEqual([]);
  });

  it('reports no unacknowledged findings on the platform stack', () => {
    expect(new AwsSolutionsChecks().validateScope(s.platform).violations).toEqual([]);
  });

  /**
   * cdk-nag names a wildcard finding by its resource alone (`IAM5[Resource::*]`), and every function acknowledges that
   * one for X-Ray: any action granted on `*` would pass under it. Checked here instead, action by action: only the
   * actions that have no resource-level permissions may be granted on every resource.
   */
  it('grants on every resource only actions that cannot be scoped to one', () => {
    const unscopable: Record<string, string> = {
      'xray:PutTraceSegments': 'active tracing',
      'xray:PutTelemetryRecords': 'active tracing',
      'xray:GetSamplingRules': 'state machine tracing',
      'xray:GetSamplingTargets': 'state machine tracing',
      'ec2:DescribeSpotPriceHistory': 'the spot price an attempt ran at, and estimates',
      'ec2:DescribeInstances': 'the instance behind a Batch job',
      'ec2:GetSpotPlacementScores': 'the spot probe of the periodic check',
      'ec2:DescribeSubnets': 'the zones of the compute subnets the probe scores',
      'batch:DescribeJobs': 'looking an attempt up in Batch (also how submitJob.sync follows a job)',
      'batch:ListJobs': 'looking an attempt up in Batch by queue and name',
      'ecr:GetAuthorizationToken': 'a registry login token, pulled by the job execution role',
      // What CDK grants a state machine for vended log delivery to CloudWatch Logs.
      'logs:CreateLogDelivery': 'execution logging',
      'logs:DeleteLogDelivery': 'execution logging',
      'logs:DescribeLogGroups': 'execution logging',
      'logs:DescribeResourcePolicies': 'execution logging',
      'logs:GetLogDelivery': 'execution logging',
      'logs:ListLogDeliveries': 'execution logging',
      'logs:PutResourcePolicy': 'execution logging',
      'logs:UpdateLogDelivery': 'execution logging',
    };
    const granted: Array<{ policy: string; action: string }> = [];
    for (const template of [s.statefulTemplate, s.platformTemplate]) {
      for (const [id, policy] of Object.entries(template.findResources('AWS::IAM::Policy'))) {
        const statements = (policy as { Properties: { PolicyDocument: { Statement: Array<Record<string, unknown>> } } })
          .Properties.PolicyDocument.Statement;
        for (const statement of statements) {
          const resources = [statement.Resource].flat();
          if (!resources.includes('*')) continue;
          for (const action of [statement.Action].flat() as string[]) granted.push({ policy: id, action });
        }
      }
    }
    expect(granted.length).toBeGreaterThan(0);
    expect(granted.filter(({ action }) => !(action in unscopable))).toEqual([]);
  });

  it('names the exact finding in every IAM acknowledgement and gives a reason', () => {
    const acks = [...acknowledgements(s.stateful), ...acknowledgements(s.platform)];
    expect(acks.length).toBeGreaterThan(0);
    for (const ack of acks) {
      expect(ack.reason.length, `${ack.path} ${ack.id}`).toBeGreaterThan(20);
      if (/AwsSolutions-IAM[45]/.test(ack.id))
        expect(ack.id).toMatch(/^AwsSolutions-IAM[45]\[(Resource|Action|Policy)::.+\]$/);
    }
  });

  it('acknowledges the team role wildcard only for that team’s own prefix', () => {
    const acks = acknowledgements(s.platform).filter((a) => a.path.includes('TeamRoles/Team-nlp'));
    expect(acks.map((a) => a.id)).toEqual([
      'AwsSolutions-IAM5[Resource::Trainyard-Stateful-WorkspaceBucketArn/teams/nlp/*]',
    ]);
  });

  it('still fails on a wildcard nobody acknowledged', () => {
    const probe = synthesize();
    new iam.Role(probe.platform, 'ProbeRole', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
    }).addToPolicy(new iam.PolicyStatement({ actions: ['s3:GetObject'], resources: ['*'] }));
    const violations = new AwsSolutionsChecks().validateScope(probe.platform).violations;
    expect(violations.map((v) => v.ruleName)).toContain('AwsSolutions-IAM5[Resource::*]');
  });
});
