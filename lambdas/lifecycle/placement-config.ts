import type { TrainyardConfig } from '../../lib/config';
import { DEFAULT_PLACEMENT_CONFIG, type PlacementPolicyConfig } from '../domain/placement';

/** The placement policy's settings from config (restart overhead and check interval keep their documented defaults). */
export function placementConfig(config: TrainyardConfig): PlacementPolicyConfig {
  return {
    ...DEFAULT_PLACEMENT_CONFIG,
    reclaimsBeforeOnDemand: config.spotPolicy.reclaimsBeforeOnDemand,
    capacityWaitSeconds: config.spotPolicy.capacityWaitMinutes * 60,
  };
}
