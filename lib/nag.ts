import { Stack, Validations } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';

/**
 * Acknowledges one exact cdk-nag AwsSolutions finding on one construct (and its children), with the reason.
 * Findings are named in full (`IAM5[Resource::…]`), never by rule alone, so a wildcard on a new resource still fails
 * synth. A finding does not name the action, though: every function acknowledges `IAM5[Resource::*]` for X-Ray, so
 * test/infra/nag.test.ts checks each action granted on `*` against those with no resource-level permissions.
 */
export function acknowledgeFinding(construct: IConstruct, finding: string, reason: string): void {
  Validations.of(construct).acknowledge({ id: `AwsSolutions-${finding}`, reason });
}

/**
 * How cdk-nag spells a resource ARN inside a finding id: an imported value by its export name, a same-stack
 * attribute as `<LogicalId.Attribute>`, a literal as itself.
 */
export function nagResourceName(scope: IConstruct, arn: string): string {
  const resolved: unknown = Stack.of(scope).resolve(arn);
  if (typeof resolved === 'string') return resolved;
  const value = resolved as Record<string, unknown>;
  const imported = value['Fn::ImportValue'];
  if (typeof imported === 'string') return imported;
  const getAtt = value['Fn::GetAtt'];
  if (Array.isArray(getAtt)) return `<${getAtt.join('.')}>`;
  throw new Error(`cannot name ${JSON.stringify(resolved)} for a cdk-nag acknowledgement`);
}
