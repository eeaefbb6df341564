import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';

/** Key prefixes inside the workspace bucket; team prefixes are what each team's job role is confined to. */
export const WORKSPACE_PREFIXES = {
  /** Everything a team's jobs read and write: code bundles, checkpoints, metrics, summaries. */
  team: (teamId: string) => `teams/${teamId}/`,
  /** Short-lived objects (presigned uploads not yet claimed, temporary exports): expire after 30 days. */
  scratch: 'scratch/',
  /** Cost reports written by the reports function. */
  reports: 'reports/',
} as const;

/**
 * The workspace bucket: code bundles, checkpoints, metrics and reports. Encrypted, SSL-only, never public,
 * versioned (a checkpoint overwritten by mistake can be recovered), server access logs to a companion bucket,
 * and lifecycle rules that keep storage from growing without bound. Retained when the stack is deleted.
 *
 * Neither bucket grants anything by ACL. S3's log delivery writes to the access-log bucket by its bucket policy, which
 * lets `logging.s3.amazonaws.com` put objects under `workspace/` only for the workspace bucket of this account (the
 * `@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy` flag; the log-delivery ACL it replaces granted the whole bucket to
 * S3's log delivery group). The workspace bucket has ACLs disabled (bucket-owner-enforced). The access-log bucket keeps
 * them enabled (bucket-owner-preferred), as it was before, so that a stack deployed with the ACL can be updated in
 * place: S3 refuses to disable ACLs on a bucket whose ACL still grants another party, and CloudFormation may leave the
 * log-delivery grant in place when the template stops setting it.
 */
export class WorkspaceBucket extends Construct {
  /** The workspace bucket. */
  public readonly bucket: s3.Bucket;
  /** Where S3 server access logs for the workspace bucket go. */
  public readonly accessLogs: s3.Bucket;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    this.accessLogs = new s3.Bucket(this, 'AccessLogs', {
      encryption: s3.BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
      removalPolicy: RemovalPolicy.RETAIN,
      lifecycleRules: [{ id: 'ExpireAccessLogs', expiration: Duration.days(365) }],
    });
    this.bucket = new s3.Bucket(this, 'Bucket', {
      encryption: s3.BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      versioned: true,
      serverAccessLogsBucket: this.accessLogs,
      serverAccessLogsPrefix: 'workspace/',
      removalPolicy: RemovalPolicy.RETAIN,
      lifecycleRules: [
        { id: 'ExpireScratch', prefix: WORKSPACE_PREFIXES.scratch, expiration: Duration.days(30) },
        { id: 'ExpireOldVersions', noncurrentVersionExpiration: Duration.days(30), expiredObjectDeleteMarker: true },
        { id: 'AbortIncompleteUploads', abortIncompleteMultipartUploadAfter: Duration.days(7) },
      ],
    });
  }
}
