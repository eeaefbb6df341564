import type * as batch from 'aws-cdk-lib/aws-batch';
import type * as ecr from 'aws-cdk-lib/aws-ecr';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct, type IConstruct } from 'constructs';
import type { TrainyardConfig } from '../config';
import { acknowledgeFinding } from '../nag';
import { TeamJobDefinitions } from './job-definitions';
import { TeamJobRoles } from './team-job-roles';
import type { TrainingImages } from './training-images';

/** Props for every team's job definitions. */
export interface JobDefinitionsProps {
  /** Tiers, teams and log retention from config. */
  readonly config: TrainyardConfig;
  /** Training images. */
  readonly images: TrainingImages;
  /** The repository the images are pulled from. */
  readonly imageRepository: ecr.IRepository;
  /** Workspace bucket (team roles are confined to a prefix of it). */
  readonly workspace: s3.IBucket;
  /** Whether Fargate tasks need a public IP. */
  readonly assignPublicIp: boolean;
  /** Prefix of job definition names. */
  readonly namePrefix: string;
}

/** The job-side of the fleet: team job roles, the execution role, the training log group and the definitions. */
export class JobDefinitions extends Construct {
  /** Job definitions by team, then tier. */
  public readonly byTeam = new Map<string, ReadonlyMap<string, batch.IJobDefinition>>();
  /** Where training containers log. */
  public readonly logGroup: logs.LogGroup;
  /** Team job roles (the lifecycle passes them when it submits). */
  public readonly teamRoles: TeamJobRoles;
  /** The constructs each team adds, by team id: its job role and its job definitions (what it costs a stack). */
  public readonly teamScopes = new Map<string, readonly IConstruct[]>();

  constructor(scope: Construct, id: string, props: JobDefinitionsProps) {
    super(scope, id);
    this.logGroup = new logs.LogGroup(this, 'TrainingLogs', { retention: props.config.logRetentionDays });
    const executionRole = new iam.Role(this, 'ExecutionRole', {
      assumedBy: new iam.ServicePrincipal('ecs-tasks.amazonaws.com'),
      description: 'Pulls Trainyard training images and writes their logs',
    });
    props.imageRepository.grantPull(executionRole);
    this.logGroup.grantWrite(executionRole);
    acknowledgeFinding(
      executionRole,
      'IAM5[Resource::*]',
      'ecr:GetAuthorizationToken (from grantPull) has no resource-level permissions; image pulls are limited to the training repository.',
    );
    this.teamRoles = new TeamJobRoles(this, 'TeamRoles', {
      teamIds: props.config.teams.map((t) => t.id),
      workspace: props.workspace,
    });
    for (const team of props.config.teams) {
      const jobRole = this.teamRoles.roles.get(team.id);
      if (!jobRole) throw new Error(`no job role for team ${team.id}`);
      const definitions = new TeamJobDefinitions(this, `Team-${team.id}`, {
        teamId: team.id,
        tiers: props.config.tiers,
        jobRole,
        executionRole,
        gpuImage: props.images.gpu,
        cpuImage: props.images.cpu,
        logGroup: this.logGroup,
        assignPublicIp: props.assignPublicIp,
        namePrefix: props.namePrefix,
      });
      this.byTeam.set(team.id, definitions.byTier);
      this.teamScopes.set(team.id, [jobRole, definitions]);
    }
  }
}
