/**
 * Everything a Trainyard handler may depend on. Handlers are built by factories that take the subset they use
 * (`Pick<ControlPlane, 'jobs' | 'batch'>`), so the same handler code runs on Lambda (SDK adapters from env) and in
 * local mode and tests (local engines and in-process ports).
 */
import type { TrainyardConfig } from '../../lib/config';
import type { JobStore } from './job-store';
import type { BudgetLedger } from './ledger';
import type { BatchControl, EventPublisher, FleetFacts, LifecycleControl, LogReader, MetricPublisher } from './ports';
import type { Workspace } from './workspace';

/** Spot quotes for a tier's instance types (SpotPriceCache on AWS). */
export interface SpotQuotes {
  quotesFor(
    instanceTypes: string[],
  ): Promise<Array<{ instanceType: string; az: string; usdPerHour: number; timestamp: string }> | undefined>;
}

/** The control plane's dependencies. */
export interface ControlPlane {
  readonly config: TrainyardConfig;
  readonly jobs: JobStore;
  readonly ledger: BudgetLedger;
  readonly workspace: Workspace;
  readonly batch: BatchControl;
  readonly events: EventPublisher;
  /** Trainyard's metrics (EMF on AWS); publish only where config.observability.platformMetrics is on. */
  readonly metrics: MetricPublisher;
  readonly lifecycle: LifecycleControl;
  readonly logs: LogReader;
  readonly fleet: FleetFacts;
  readonly spotQuotes: SpotQuotes;
  /** Prefix of Batch queue and job definition names (batch-names.ts). */
  readonly batchPrefix: string;
  /** Log group of training containers. */
  readonly trainingLogGroup: string;
  /** Current time. */
  readonly clock: () => Date;
  /** New unique, sortable job id. */
  readonly newId: () => string;
}
