import { describe, expect, it } from 'vitest';
import { forecast, InvalidForecastInput, type ProgressSample } from '../../lambdas/domain/forecast';

const s = (step: number, elapsedSeconds: number): ProgressSample => ({ step, elapsedSeconds });
const PRICE = 0.526;
const usd = (seconds: number) => (seconds / 3600) * PRICE;

describe('forecast', () => {
  it.each([
    {
      name: 'steady progress',
      // 3 intervals at 100 steps / 50 s = 2 steps/s; 700 steps left → 350 s.
      samples: [s(0, 0), s(100, 50), s(200, 100), s(300, 150)],
      rate: 2,
      eta: 350,
      range: { low: 350, high: 350 },
      fraction: 0.3,
      confidence: 'medium',
    },
    {
      name: 'one slow interval (an evaluation pass) moves the range, not the median',
      // Rates 2, 2, 1, 2, 2 → median 2; 500 left → 250 s, fastest 2 → 250 s, slowest 1 → 500 s.
      samples: [s(0, 0), s(100, 50), s(200, 100), s(300, 200), s(400, 250), s(500, 300)],
      rate: 2,
      eta: 250,
      range: { low: 250, high: 500 },
      fraction: 0.5,
      confidence: 'medium',
    },
    {
      name: 'many even intervals',
      // 6 intervals at 4 steps/s, spread 1 → high confidence; 400 left → 100 s.
      samples: [0, 1, 2, 3, 4, 5, 6].map((i) => s(i * 100, i * 25)),
      rate: 4,
      eta: 100,
      range: { low: 100, high: 100 },
      fraction: 0.6,
      confidence: 'high',
    },
    {
      name: 'unsorted samples and a resume that moved the step back',
      // By elapsed: (0,0) (100,100) (50,110) (150,210): rates 1, [step back: skipped], 1 → 850 left at 1 step/s.
      samples: [s(150, 210), s(0, 0), s(50, 110), s(100, 100)],
      rate: 1,
      eta: 850,
      range: { low: 850, high: 850 },
      fraction: 0.15,
      confidence: 'low',
    },
    {
      name: 'only the most recent 10 intervals count',
      // 2 early intervals at 0.5 steps/s, then 10 at 2 steps/s: the window holds only the fast ones.
      samples: [
        s(0, 0),
        s(50, 100),
        s(100, 200),
        ...Array.from({ length: 10 }, (_, i) => s(100 + (i + 1) * 20, 200 + (i + 1) * 10)),
      ],
      rate: 2,
      eta: 350,
      range: { low: 350, high: 350 },
      fraction: 0.3,
      confidence: 'high',
    },
  ])('$name', ({ samples, rate, eta, range, fraction, confidence }) => {
    const f = forecast({ samples, totalSteps: 1000, spentUsd: 0.1, usdPerHour: PRICE });
    expect(f?.stepsPerSecond).toBeCloseTo(rate, 12);
    expect(f?.etaSeconds.value).toBeCloseTo(eta, 9);
    expect(f?.etaSeconds.confidence).toBe(confidence);
    expect(f?.etaRangeSeconds.low).toBeCloseTo(range.low, 9);
    expect(f?.etaRangeSeconds.high).toBeCloseTo(range.high, 9);
    expect(f?.costToFinishUsd.expected).toBeCloseTo(usd(eta), 12);
    expect(f?.costToFinishUsd.low).toBeCloseTo(usd(range.low), 12);
    expect(f?.costToFinishUsd.high).toBeCloseTo(usd(range.high), 12);
    expect(f?.projectedTotalUsd).toBeCloseTo(0.1 + usd(eta), 12);
    expect(f?.fractionDone).toBeCloseTo(fraction, 12);
  });

  it('charges the time to finish only beyond what the running attempt has been billed ahead (the 60 s minimum)', () => {
    const samples = [0, 100, 200].map((t, i) => ({ elapsedSeconds: t, step: i * 100 }));
    // 800 steps left at 1 step/s: 800 s, of which 40 s are billed already.
    const f = forecast({ samples, totalSteps: 1000, spentUsd: 0.1, usdPerHour: PRICE, billedAheadSeconds: 40 });
    expect(f?.costToFinishUsd.expected).toBeCloseTo(usd(760), 12);
    expect(f?.projectedTotalUsd).toBeCloseTo(0.1 + usd(760), 12);
    const soon = forecast({ samples, totalSteps: 210, spentUsd: 0.1, usdPerHour: PRICE, billedAheadSeconds: 40 });
    expect(soon?.costToFinishUsd.expected).toBe(0);
    expect(soon?.projectedTotalUsd).toBe(0.1);
    expect(() => forecast({ samples, totalSteps: 10, spentUsd: 0, usdPerHour: PRICE, billedAheadSeconds: -1 })).toThrow(
      'billedAheadSeconds must be a finite number >= 0, got -1',
    );
  });

  it('states its basis', () => {
    const f = forecast({
      samples: [s(0, 0), s(100, 50), s(200, 100)],
      totalSteps: 1000,
      spentUsd: 0,
      usdPerHour: PRICE,
    });
    // 800 steps at 2 steps/s = 400 s = 6.67 min; 400/3600 × 0.526 = $0.058.
    expect(f?.etaSeconds.basis).toBe(
      '800 steps left at 2 steps/s (median of the last 2 intervals; range 2-2), ≈6.67 min and $0.06 at $0.53/h',
    );
  });

  it('forecasts nothing left once the last step is reached', () => {
    const f = forecast({ samples: [s(900, 100), s(1000, 110)], totalSteps: 1000, spentUsd: 2, usdPerHour: PRICE });
    expect(f?.etaSeconds.value).toBe(0);
    expect(f?.costToFinishUsd).toEqual({ expected: 0, low: 0, high: 0 });
    expect(f?.projectedTotalUsd).toBe(2);
    expect(f?.fractionDone).toBe(1);
    expect(f?.etaSeconds.basis).toBe('step 1000 of 1000: done');
  });

  it.each([
    { name: 'no samples', samples: [] },
    { name: 'one sample', samples: [s(10, 5)] },
    { name: 'two samples at the same elapsed time', samples: [s(10, 5), s(20, 5)] },
    { name: 'non-finite samples', samples: [s(Number.NaN, 1), s(10, Number.POSITIVE_INFINITY), s(5, 3)] },
    { name: 'no progress in the window (stalled)', samples: [s(10, 5), s(10, 50), s(10, 100)] },
  ])('gives no forecast for $name', ({ samples }) => {
    expect(forecast({ samples, totalSteps: 100, spentUsd: 0, usdPerHour: PRICE })).toBeUndefined();
  });

  it.each([
    {
      input: { totalSteps: 100, spentUsd: 0, usdPerHour: -1 },
      message: 'usdPerHour must be a finite number >= 0, got -1',
    },
    {
      input: { totalSteps: Number.NaN, spentUsd: 0, usdPerHour: 1 },
      message: 'totalSteps must be a finite number >= 0, got NaN',
    },
    {
      input: { totalSteps: 100, spentUsd: -0.5, usdPerHour: 1 },
      message: 'spentUsd must be a finite number >= 0, got -0.5',
    },
  ])('rejects $message', ({ input, message }) => {
    expect(() => forecast({ samples: [s(0, 0), s(1, 1)], ...input })).toThrow(new InvalidForecastInput(message));
  });
});

describe('forecast with stalled intervals in the window', () => {
  // Rates per interval: 0, 0, 0 (stalled: a restore, a hung data loader), then 3, 3, 3 steps/s. The median of
  // [0, 0, 0, 3, 3, 3] is 1.5 steps/s, slower than every interval that moved; 910 steps are left.
  const samples = [s(0, 0), s(0, 10), s(0, 20), s(0, 30), s(30, 40), s(60, 50), s(90, 60)];
  const f = forecast({ samples, totalSteps: 1000, spentUsd: 0, usdPerHour: 3.6 });

  it('widens the range to hold the expected ETA and cost', () => {
    expect(f?.etaSeconds.value).toBeCloseTo(910 / 1.5, 9);
    expect(f?.etaRangeSeconds.low).toBeCloseTo(910 / 3, 9);
    expect(f?.etaRangeSeconds.high).toBeCloseTo(910 / 1.5, 9);
    // $3.60/h is $0.001 a second.
    expect(f?.costToFinishUsd.expected).toBeCloseTo(0.001 * (910 / 1.5), 9);
    expect(f?.costToFinishUsd.high).toBeCloseTo(0.001 * (910 / 1.5), 9);
  });

  it('is not high-confidence with a stalled interval in its window, however steady the rest', () => {
    expect(f?.etaSeconds.confidence).toBe('medium');
    // Six intervals at 2 steps/s, then four with no step: median 2, every interval that moved at 2.
    const hung = [0, 1, 2, 3, 4, 5, 6].map((i) => s(i * 100, i * 50));
    for (let i = 1; i <= 4; i++) hung.push(s(600, 300 + i * 50));
    const g = forecast({ samples: hung, totalSteps: 1000, spentUsd: 0, usdPerHour: 1 });
    expect(g?.etaSeconds.confidence).toBe('medium');
    const steady = [0, 1, 2, 3, 4, 5, 6].map((i) => s(i * 100, i * 50));
    expect(forecast({ samples: steady, totalSteps: 1000, spentUsd: 0, usdPerHour: 1 })?.etaSeconds.confidence).toBe(
      'high',
    );
  });
});
