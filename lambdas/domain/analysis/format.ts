/**
 * Number formatting for the human-readable `basis` and `reason` strings the cost brain returns. Kept in one place
 * so every message reads the same way (GiB with one decimal, durations in the largest sensible unit, dollars with
 * cents or more precision when below a cent).
 */

import { MICROS_PER_USD, microUsdToCents } from '../metering';

/** `10745088` → `10.75M`; `2.3e15` → `2.3P` (SI prefixes, 3 significant digits). */
export function formatCount(value: number): string {
  const units: Array<[number, string]> = [
    [1e21, 'Z'],
    [1e18, 'E'],
    [1e15, 'P'],
    [1e12, 'T'],
    [1e9, 'G'],
    [1e6, 'M'],
    [1e3, 'k'],
  ];
  for (const [scale, suffix] of units) {
    if (Math.abs(value) >= scale) return `${trim(value / scale)}${suffix}`;
  }
  return trim(value);
}

/** Bytes → `3.1 GiB`. */
export function formatGiB(gib: number): string {
  const text = gib < 10 ? gib.toFixed(1) : gib < 100 ? String(Number(gib.toFixed(1))) : Math.round(gib).toString();
  return `${text} GiB`;
}

/** Seconds → `45 s`, `3.2 min`, `2.5 h`, `3.1 d`. */
export function formatDuration(seconds: number): string {
  if (seconds < 90) return `${trim(seconds)} s`;
  if (seconds < 5400) return `${trim(seconds / 60)} min`;
  if (seconds < 172800) return `${trim(seconds / 3600)} h`;
  return `${trim(seconds / 86400)} d`;
}

/**
 * Dollars → `$0.53`; amounts under a cent keep two significant digits (`$0.0042`). Cents are rounded half up in whole
 * micro-dollars, as the platform rounds money everywhere: `toFixed` rounds the binary number, and a half cent such as
 * $2.675 (2.67499… in binary) would show a cent low.
 */
export function formatUsd(usd: number): string {
  if (usd !== 0 && Math.abs(usd) < 0.01) return `$${Number(usd.toPrecision(2))}`;
  const micros = Math.round(Math.abs(usd) * MICROS_PER_USD);
  // Beyond what micro-dollars hold exactly (billions of dollars), a cent more or less is no longer the point.
  if (!Number.isSafeInteger(micros)) return `$${usd.toFixed(2)}`;
  return `$${usd < 0 ? '-' : ''}${microUsdToCents(micros).toFixed(2)}`;
}

function trim(value: number): string {
  return Number(value.toPrecision(3)).toString();
}
