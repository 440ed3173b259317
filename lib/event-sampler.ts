/** Every event of a class is kept up to `keepPerWindow` per window, then one in `oneIn`. */
export interface SamplingPolicy {
  keepPerWindow: number;
  oneIn: number;
  windowMs: number;
}

export interface SampleDecision {
  keep: boolean;
  /**
   * When kept: how many events of this class were dropped since the previous kept one (also across
   * a window boundary). Every dropped event is counted in the next kept event of its class, so the
   * counts of the kept events add up to everything that happened, except a tail of under `oneIn`.
   */
  dropped: number;
}

interface ClassWindow {
  start: number;
  seen: number;
  dropped: number;
}

/**
 * Threshold sampling per class in fixed windows (counter-based, so it is deterministic for a given
 * clock). Memory is one entry per class: callers pass classes from a closed set in code, never
 * from input. The clock is passed in (ms).
 */
export class ThresholdSampler {
  private readonly windows = new Map<string, ClassWindow>();

  constructor(readonly policy: SamplingPolicy) {}

  decide(cls: string, now: number): SampleDecision {
    let w = this.windows.get(cls);
    if (!w) {
      w = { start: now, seen: 0, dropped: 0 };
      this.windows.set(cls, w);
    } else if (now - w.start >= this.policy.windowMs || now < w.start) {
      w.start = now;
      w.seen = 0;
    }
    w.seen += 1;
    const over = w.seen - this.policy.keepPerWindow;
    if (over > 0 && over % this.policy.oneIn !== 0) {
      w.dropped += 1;
      return { keep: false, dropped: 0 };
    }
    const dropped = w.dropped;
    w.dropped = 0;
    return { keep: true, dropped };
  }
}
