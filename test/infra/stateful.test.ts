import { readFileSync } from 'node:fs';
import { Stage } from 'aws-cdk-lib';
import { Match } from 'aws-cdk-lib/assertions';
import * as cxapi from 'aws-cdk-lib/cx-api';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEPLOYMENT_NAMES } from '../../lib/app';
import { resourcesOf, type Synthesized, synthesize } from './synth';

let s: Synthesized;
beforeAll(() => {
  s = synthesize();
});

function workspaceBucket(): Record<string, unknown> {
  const buckets = resourcesOf(s.statefulTemplate, 'AWS::S3::Bucket').filter(([, p]) => p.VersioningConfiguration);
  expect(buckets).toHaveLength(1);
  return (buckets[0] as [string, Record<string, unknown>])[1];
}

describe('workspace bucket', () => {
  it('encrypts objects at rest', () => {
    expect(workspaceBucket().BucketEncryption).toEqual({
      ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }],
    });
  });

  it('blocks every kind of public access', () => {
    expect(workspaceBucket().PublicAccessBlockConfiguration).toEqual({
      BlockPublicAcls: true,
      BlockPublicPolicy: true,
      IgnorePublicAcls: true,
      RestrictPublicBuckets: true,
    });
  });

  it('is versioned so an overwritten checkpoint can be recovered', () => {
    expect(workspaceBucket().VersioningConfiguration).toEqual({ Status: 'Enabled' });
  });

  it('writes server access logs to the companion bucket', () => {
    expect(workspaceBucket().LoggingConfiguration).toEqual({
      DestinationBucketName: { Ref: expect.stringMatching(/^WorkspaceAccessLogs/) },
      LogFilePrefix: 'workspace/',
    });
  });

  it('grants nothing by ACL in either bucket; the workspace has ACLs disabled, the access-log bucket as before', () => {
    const buckets = resourcesOf(s.statefulTemplate, 'AWS::S3::Bucket');
    expect(buckets).toHaveLength(2);
    const ownership = Object.fromEntries(
      buckets.map(([id, props]) => {
        expect(props.AccessControl).toBeUndefined();
        const { Rules } = props.OwnershipControls as { Rules: Array<{ ObjectOwnership: string }> };
        return [id.replace(/[0-9A-F]{8}$/, ''), Rules.map((rule) => rule.ObjectOwnership)];
      }),
    );
    // The access-log bucket's ownership is what stacks deployed with its log-delivery ACL have, so they update in place.
    expect(ownership).toEqual({
      WorkspaceBucket: ['BucketOwnerEnforced'],
      WorkspaceAccessLogs: ['BucketOwnerPreferred'],
    });
  });

  it("lets S3's log delivery write to the access-log bucket only under workspace/, for this account's workspace", () => {
    const workspaceId = resourcesOf(s.statefulTemplate, 'AWS::S3::Bucket').find(
      ([, p]) => p.VersioningConfiguration,
    )?.[0];
    const logDelivery = resourcesOf(s.statefulTemplate, 'AWS::S3::BucketPolicy')
      .filter(([, p]) => JSON.stringify(p.Bucket).includes('WorkspaceAccessLogs'))
      .flatMap(([, p]) => (p.PolicyDocument as { Statement: Array<Record<string, unknown>> }).Statement)
      .filter((statement) => statement.Effect === 'Allow');
    expect(logDelivery).toEqual([
      {
        Effect: 'Allow',
        Principal: { Service: 'logging.s3.amazonaws.com' },
        Action: 's3:PutObject',
        Resource: {
          'Fn::Join': ['', [{ 'Fn::GetAtt': [expect.stringMatching(/^WorkspaceAccessLogs/), 'Arn'] }, '/workspace/*']],
        },
        Condition: {
          ArnLike: { 'aws:SourceArn': { 'Fn::GetAtt': [workspaceId, 'Arn'] } },
          StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } },
        },
      },
    ]);
  });

  it('denies every request that is not over TLS', () => {
    s.statefulTemplate.hasResourceProperties('AWS::S3::BucketPolicy', {
      Bucket: { Ref: Match.stringLikeRegexp('WorkspaceBucket') },
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Effect: 'Deny', Action: 's3:*', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
        ]),
      },
    });
  });

  it('expires scratch/ after 30 days, old versions after 30 days and incomplete uploads after 7', () => {
    expect(workspaceBucket().LifecycleConfiguration).toEqual({
      Rules: [
        { Id: 'ExpireScratch', Prefix: 'scratch/', ExpirationInDays: 30, Status: 'Enabled' },
        {
          Id: 'ExpireOldVersions',
          NoncurrentVersionExpiration: { NoncurrentDays: 30 },
          ExpiredObjectDeleteMarker: true,
          Status: 'Enabled',
        },
        { Id: 'AbortIncompleteUploads', AbortIncompleteMultipartUpload: { DaysAfterInitiation: 7 }, Status: 'Enabled' },
      ],
    });
  });

  it('is retained when the stack is deleted', () => {
    const [id] = resourcesOf(s.statefulTemplate, 'AWS::S3::Bucket').find(([, p]) => p.VersioningConfiguration) ?? [];
    expect(s.statefulTemplate.toJSON().Resources[id as string].DeletionPolicy).toBe('Retain');
  });
});

describe('tables', () => {
  const table = (name: string) => {
    const found = Object.entries(s.statefulTemplate.findResources('AWS::DynamoDB::GlobalTable')).find(([id]) =>
      id.startsWith(`Tables${name}`),
    );
    if (!found) throw new Error(`no ${name} table`);
    return found[1] as { Properties: Record<string, unknown>; DeletionPolicy?: string };
  };

  it.each(['Jobs', 'Budgets'])('%s table bills on demand', (name) => {
    expect(table(name).Properties.BillingMode).toBe('PAY_PER_REQUEST');
  });

  it.each(['Jobs', 'Budgets'])('%s table has point-in-time recovery', (name) => {
    expect(table(name).Properties.Replicas).toEqual([
      expect.objectContaining({ PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true } }),
    ]);
  });

  it.each(['Jobs', 'Budgets'])('%s table is retained on stack deletion', (name) => {
    expect(table(name).DeletionPolicy).toBe('Retain');
  });

  it('indexes jobs by team and time and by state, and attempts by EC2 instance id', () => {
    expect(table('Jobs').Properties.GlobalSecondaryIndexes).toEqual([
      {
        IndexName: 'byTeam',
        KeySchema: [
          { AttributeName: 'gsi1pk', KeyType: 'HASH' },
          { AttributeName: 'gsi1sk', KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'ALL' },
      },
      {
        IndexName: 'byInstance',
        KeySchema: [
          { AttributeName: 'gsi2pk', KeyType: 'HASH' },
          { AttributeName: 'gsi2sk', KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'ALL' },
      },
      {
        IndexName: 'byState',
        KeySchema: [
          { AttributeName: 'state', KeyType: 'HASH' },
          { AttributeName: 'gsi1sk', KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'ALL' },
      },
    ]);
    expect(table('Jobs').Properties.AttributeDefinitions).toContainEqual({
      AttributeName: 'state',
      AttributeType: 'S',
    });
  });
});

describe('training image repository', () => {
  it('scans every image on push', () => {
    s.statefulTemplate.hasResourceProperties('AWS::ECR::Repository', {
      RepositoryName: DEPLOYMENT_NAMES.imageRepository,
      ImageScanningConfiguration: { ScanOnPush: true },
    });
  });

  it('makes tags immutable so a job definition always runs the image it was deployed with', () => {
    s.statefulTemplate.hasResourceProperties('AWS::ECR::Repository', { ImageTagMutability: 'IMMUTABLE' });
  });

  it('is where the platform stack publishes both training images', () => {
    const assembly = (Stage.of(s.platform) as Stage).synth();
    const manifest = assembly.artifacts.find(
      (a): a is cxapi.AssetManifestArtifact =>
        a instanceof cxapi.AssetManifestArtifact && a.id === `${DEPLOYMENT_NAMES.platform}.assets`,
    );
    const images = JSON.parse(readFileSync(manifest?.file ?? '', 'utf8')).dockerImages as Record<
      string,
      { destinations: Record<string, { repositoryName: string }> }
    >;
    const repositories = Object.values(images).flatMap((i) =>
      Object.values(i.destinations).map((d) => d.repositoryName),
    );
    expect(repositories).toEqual([DEPLOYMENT_NAMES.imageRepository, DEPLOYMENT_NAMES.imageRepository]);
  });
});

describe('exports', () => {
  it.each(['WorkspaceBucketArn', 'WorkspaceBucketName', 'JobsTableArn', 'BudgetsTableArn', 'ImageRepositoryArn'])(
    'exports %s under a stable name',
    (name) => {
      const outputs = Object.values(
        s.statefulTemplate.toJSON().Outputs as Record<string, { Export?: { Name: string } }>,
      );
      expect(outputs.map((o) => o.Export?.Name)).toContain(`${DEPLOYMENT_NAMES.stateful}-${name}`);
    },
  );
});
