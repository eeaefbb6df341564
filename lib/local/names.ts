/**
 * Table and bucket names local mode uses (the stacks name theirs; the layout inside is the same). Kept apart from
 * control-plane.ts so that the CLI knows them without loading local mode.
 */
export const LOCAL_NAMES = {
  jobsTable: 'trainyard-jobs',
  budgetsTable: 'trainyard-budgets',
  bucket: 'trainyard-workspace',
};
