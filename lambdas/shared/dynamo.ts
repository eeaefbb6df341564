/**
 * The one way adapters build a DynamoDB document client, so marshalling behaves the same in every Lambda, in local
 * mode and in tests; and the one place the DynamoDB SDK packages are loaded.
 */
import { createRequire } from 'node:module';
import type * as DynamoDbModule from '@aws-sdk/client-dynamodb';
import type * as DocumentModule from '@aws-sdk/lib-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';

/**
 * `@aws-sdk/client-dynamodb`, loaded with `require`, not `import`. Both DynamoDB packages are CommonJS, and Node's ESM
 * loader runs cjs-module-lexer over every CommonJS module an `import` reaches and routes their own `require`s through
 * itself (nodejs/node#47999, #59913), which made importing them ~50 ms slower than requiring the very same modules;
 * every handler loads them at cold start. In a Lambda bundle `require` is the banner's `createRequire` (the bare call
 * also lets esbuild see and keep the package external); under tsx and vitest, where an ES module has no `require`,
 * one is made here. Either way Node's module cache hands out the one instance that an `import` would.
 */
export const dynamoDbSdk: typeof DynamoDbModule =
  typeof require === 'function'
    ? require('@aws-sdk/client-dynamodb')
    : createRequire(import.meta.url)('@aws-sdk/client-dynamodb');

/** `@aws-sdk/lib-dynamodb`, loaded with `require` for the same reason as {@link dynamoDbSdk}. */
export const documentSdk: typeof DocumentModule =
  typeof require === 'function'
    ? require('@aws-sdk/lib-dynamodb')
    : createRequire(import.meta.url)('@aws-sdk/lib-dynamodb');

const { DynamoDBClient } = dynamoDbSdk;

/** Where the client talks to: AWS by default, or a local engine (dynalite) at `endpoint`. */
export interface DocumentClientOptions {
  /** A local engine's URL, e.g. http://127.0.0.1:4567. @default - the AWS regional endpoint */
  readonly endpoint?: string;
  /** @default - the SDK's region chain (AWS_REGION in Lambda); us-east-1 when an endpoint is given without one */
  readonly region?: string;
  /** What a local engine is signed with (local mode starts its engines with a key of its own). @default dummy ones */
  readonly credentials?: { readonly accessKeyId: string; readonly secretAccessKey: string };
}

/**
 * A document client that drops undefined attributes (optional fields stay optional instead of failing the write)
 * and refuses class instances (a Date or a class slipped into an item is a bug, not something to flatten silently).
 * Against a local endpoint it signs with the credentials given, else fixed dummy ones: the tests run with no AWS
 * credentials at all, and an engine started without a key answers any.
 */
export function createDocumentClient(options: DocumentClientOptions = {}): DynamoDBDocumentClient {
  const local = options.endpoint !== undefined;
  const client = new DynamoDBClient({
    ...(local
      ? {
          endpoint: options.endpoint,
          region: options.region ?? 'us-east-1',
          credentials: { ...(options.credentials ?? { accessKeyId: 'local', secretAccessKey: 'local' }) },
        }
      : options.region === undefined
        ? {}
        : { region: options.region }),
  });
  return documentSdk.DynamoDBDocumentClient.from(client, {
    marshallOptions: { removeUndefinedValues: true, convertClassInstanceToMap: false },
    unmarshallOptions: { wrapNumbers: false },
  });
}
