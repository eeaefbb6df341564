// Lambda entry for the job state machine's pause step: the step's logic lives in lambdas/lifecycle/pause.ts.

import { createPauseHandler } from '../lifecycle/pause';
import { awsControlPlane } from '../shared/aws-control-plane';

export const handler = createPauseHandler(awsControlPlane());
