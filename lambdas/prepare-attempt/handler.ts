// Lambda entry for the job state machine's prepare-attempt step: the step's logic lives in lambdas/lifecycle/prepare-attempt.ts.

import { createPrepareAttemptHandler } from '../lifecycle/prepare-attempt';
import { awsControlPlane } from '../shared/aws-control-plane';

export const handler = createPrepareAttemptHandler(awsControlPlane());
