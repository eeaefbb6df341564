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
