import { Aws, DefaultStackSynthesizer, Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as ecr from 'aws-cdk-lib/aws-ecr';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';

/** Props for the training image repository. */
export interface ImageRepositoryProps {
  /** Repository name; the platform stack's synthesizer publishes its image assets here, so it must be literal. */
  readonly repositoryName: string;
  /** @default - the CDK default bootstrap qualifier (hnb659fds) */
  readonly bootstrapQualifier?: string;
}

/**
 * The ECR repository that holds Trainyard's training images. The CDK bootstrap repository does not scan on push, so
 * Trainyard owns this one (scan on push, immutable tags, encryption, bounded history) and lets the bootstrap's
 * image-publishing role push the images that `cdk deploy` builds. See docs/adr/0002-training-image-repository.md.
 */
export class ImageRepository extends Construct {
  /** The repository. */
  public readonly repository: ecr.Repository;

  constructor(scope: Construct, id: string, props: ImageRepositoryProps) {
    super(scope, id);
    this.repository = new ecr.Repository(this, 'Repository', {
      repositoryName: props.repositoryName,
      imageScanOnPush: true,
      imageTagMutability: ecr.TagMutability.IMMUTABLE,
      encryption: ecr.RepositoryEncryption.AES_256,
      removalPolicy: RemovalPolicy.RETAIN,
      lifecycleRules: [
        {
          description: 'Drop untagged layers after a day',
          tagStatus: ecr.TagStatus.UNTAGGED,
          maxImageAge: Duration.days(1),
        },
        { description: 'Keep the 30 most recent images', maxImageCount: 30 },
      ],
    });
    const qualifier = props.bootstrapQualifier ?? DefaultStackSynthesizer.DEFAULT_QUALIFIER;
    const publishingRole = Stack.of(this).formatArn({
      service: 'iam',
      region: '',
      resource: 'role',
      resourceName: `cdk-${qualifier}-image-publishing-role-${Aws.ACCOUNT_ID}-${Aws.REGION}`,
    });
    this.repository.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'CdkImagePublishing',
        principals: [new iam.ArnPrincipal(publishingRole)],
        actions: [
          'ecr:BatchCheckLayerAvailability',
          'ecr:BatchGetImage',
          'ecr:CompleteLayerUpload',
          'ecr:DescribeImages',
          'ecr:DescribeRepositories',
          'ecr:GetDownloadUrlForLayer',
          'ecr:InitiateLayerUpload',
          'ecr:PutImage',
          'ecr:UploadLayerPart',
        ],
      }),
    );
  }
}
