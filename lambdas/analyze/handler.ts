// Lambda entry for the job state machine's analyze step: the step's logic lives in lambdas/lifecycle/analyze.ts.

import { createAnalyzeHandler } from '../lifecycle/analyze';
import { awsControlPlane } from '../shared/aws-control-plane';

export const handler = createAnalyzeHandler(awsControlPlane());
