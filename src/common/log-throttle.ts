/**
 * Lets a repeated log line through at most once per interval per key (a schedule refused every
 * second logs once a minute, not once a tick), and counts the lines it held back, so the next
 * line that goes out can say how many there were. A key whose interval has passed twice over
 * without a line is dropped, so the map holds only keys that are still logging.
 */
export class LogThrottle {
  private readonly keys = new Map<string, { since: number; held: number }>();

  constructor(private readonly intervalMs: number) {}

  /**
   * Whether this line of `key` goes out: null to hold it back, else how many lines of the key
   * were held back since the last one that went out.
   */
  admit(key: string): number | null {
    const now = Date.now();
    for (const [other, entry] of this.keys) {
      if (now - entry.since >= 2 * this.intervalMs) {
        this.keys.delete(other);
      }
    }
    const entry = this.keys.get(key);
    if (entry === undefined) {
      this.keys.set(key, { since: now, held: 0 });
      return 0;
    }
    if (now - entry.since >= this.intervalMs) {
      const held = entry.held;
      this.keys.set(key, { since: now, held: 0 });
      return held;
    }
    entry.held += 1;
    return null;
  }
}
