// Lambda entry for the job state machine's Backoff step: the step's logic lives in lambdas/lifecycle/backoff.ts.

import { createBackoffHandler } from '../lifecycle/backoff';
import { awsControlPlane } from '../shared/aws-control-plane';

export const handler = createBackoffHandler(awsControlPlane());
