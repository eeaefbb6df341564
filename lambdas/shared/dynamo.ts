/**
 * The one way adapters build a DynamoDB document client, so marshalling behaves the same in every Lambda, in local
 * mode and in tests.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';

/** Where the client talks to: AWS by default, or a local engine (dynalite) at `endpoint`. */
export interface DocumentClientOptions {
  /** A local engine's URL, e.g. http://127.0.0.1:4567. @default - the AWS regional endpoint */
  readonly endpoint?: string;
  /** @default - the SDK's region chain (AWS_REGION in Lambda); us-east-1 when an endpoint is given without one */
  readonly region?: string;
}

/**
 * A document client that drops undefined attributes (optional fields stay optional instead of failing the write)
 * and refuses class instances (a Date or a class slipped into an item is a bug, not something to flatten silently).
 * Against a local endpoint it signs with fixed dummy credentials, because local engines ignore signatures and the
 * tests run with no AWS credentials at all.
 */
export function createDocumentClient(options: DocumentClientOptions = {}): DynamoDBDocumentClient {
  const local = options.endpoint !== undefined;
  const client = new DynamoDBClient({
    ...(local
      ? {
          endpoint: options.endpoint,
          region: options.region ?? 'us-east-1',
          credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
        }
      : options.region === undefined
        ? {}
        : { region: options.region }),
  });
  return DynamoDBDocumentClient.from(client, {
    marshallOptions: { removeUndefinedValues: true, convertClassInstanceToMap: false },
    unmarshallOptions: { wrapNumbers: false },
  });
}
