import * as iam from 'aws-cdk-lib/aws-iam';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type { IConstruct } from 'constructs';
import { acknowledgeFinding, nagResourceName } from './nag';

/** Object-level access a control-plane function needs in the workspace. */
export type WorkspaceAccess = 'read' | 'read-write';

/**
 * Grants a control-plane function exact object actions under the workspace's team folders (instead of the L2's
 * `s3:GetObject*`/`List*` families) and listing of those folders only. Control-plane functions serve every team,
 * so the wildcard is the team folder, acknowledged here once with its reason.
 */
export function grantTeamFolders(fn: iam.IGrantable & IConstruct, bucket: s3.IBucket, access: WorkspaceAccess): void {
  const actions =
    access === 'read'
      ? ['s3:GetObject']
      : ['s3:GetObject', 's3:PutObject', 's3:DeleteObject', 's3:AbortMultipartUpload'];
  fn.grantPrincipal.addToPrincipalPolicy(
    new iam.PolicyStatement({ actions, resources: [bucket.arnForObjects('teams/*')] }),
  );
  fn.grantPrincipal.addToPrincipalPolicy(
    new iam.PolicyStatement({
      actions: ['s3:ListBucket'],
      resources: [bucket.bucketArn],
      conditions: { StringLike: { 's3:prefix': ['teams/*'] } },
    }),
  );
  acknowledgeFinding(
    fn,
    `IAM5[Resource::${nagResourceName(fn, bucket.bucketArn)}/teams/*]`,
    'The control plane serves every team: it reads bundles, progress and checkpoints under any team folder, and nothing outside teams/.',
  );
}

/** Acknowledges the `<table>/index/*` wildcard that a table grant with global secondary indexes adds. */
export function acknowledgeTableIndexes(fn: IConstruct, tableArn: string, why: string): void {
  acknowledgeFinding(fn, `IAM5[Resource::${nagResourceName(fn, tableArn)}/index/*]`, why);
}
