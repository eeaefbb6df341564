// Lambda entry for the job state machine's cost-gate step: the step's logic lives in lambdas/lifecycle/cost-gate.ts.

import { createCostGateHandler } from '../lifecycle/cost-gate';
import { awsControlPlane } from '../shared/aws-control-plane';

export const handler = createCostGateHandler(awsControlPlane());
