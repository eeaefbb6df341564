/** The part of the control plane the API uses (its function is granted exactly these). */
import type { ControlPlane } from '../shared/control-plane';

/** Dependencies of the API handler. */
export type ApiPlane = Pick<
  ControlPlane,
  | 'config'
  | 'jobs'
  | 'ledger'
  | 'workspace'
  | 'batch'
  | 'events'
  | 'lifecycle'
  | 'logs'
  | 'spotQuotes'
  | 'batchPrefix'
  | 'clock'
  | 'newId'
>;
