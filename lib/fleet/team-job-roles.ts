import * as iam from 'aws-cdk-lib/aws-iam';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { acknowledgeFinding, nagResourceName } from '../nag';
import { WORKSPACE_PREFIXES } from '../stateful/workspace-bucket';

/** Props for the team job roles. */
export interface TeamJobRolesProps {
  /** Team ids from config. */
  readonly teamIds: readonly string[];
  /** The workspace bucket each role is confined to a prefix of. */
  readonly workspace: s3.IBucket;
}

/**
 * One IAM role per team for its training containers. A role reads and writes only `teams/<team>/` in the workspace
 * bucket and lists only that prefix, so one team's jobs can't read another team's code, data or checkpoints.
 */
export class TeamJobRoles extends Construct {
  /** Job role by team id. */
  public readonly roles: ReadonlyMap<string, iam.IRole>;

  constructor(scope: Construct, id: string, props: TeamJobRolesProps) {
    super(scope, id);
    const roles = new Map<string, iam.IRole>();
    for (const teamId of props.teamIds) {
      const prefix = WORKSPACE_PREFIXES.team(teamId);
      const role = new iam.Role(this, `Team-${teamId}`, {
        assumedBy: new iam.ServicePrincipal('ecs-tasks.amazonaws.com'),
        description: `Trainyard training jobs of team ${teamId}: workspace prefix ${prefix} only`,
      });
      role.addToPrincipalPolicy(
        new iam.PolicyStatement({
          sid: 'TeamPrefixObjects',
          actions: ['s3:GetObject', 's3:PutObject', 's3:DeleteObject', 's3:AbortMultipartUpload'],
          resources: [props.workspace.arnForObjects(`${prefix}*`)],
        }),
      );
      role.addToPrincipalPolicy(
        new iam.PolicyStatement({
          sid: 'TeamPrefixListing',
          actions: ['s3:ListBucket'],
          resources: [props.workspace.bucketArn],
          conditions: { StringLike: { 's3:prefix': [`${prefix}*`] } },
        }),
      );
      acknowledgeFinding(
        role,
        `IAM5[Resource::${nagResourceName(this, props.workspace.bucketArn)}/${prefix}*]`,
        `Objects under the team's own prefix (${prefix}) are created by its jobs at run time; nothing outside it is reachable.`,
      );
      roles.set(teamId, role);
    }
    this.roles = roles;
  }
}
