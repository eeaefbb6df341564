/** Lambda entry: Batch job state changes (EventBridge, default bus). */

import { awsControlPlane } from '../shared/aws-control-plane';
import { createBatchEventsHandler } from './batch-events';

/** The Lambda handler. */
export const handler = createBatchEventsHandler(awsControlPlane());
