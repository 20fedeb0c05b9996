import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** How often the memory held by Buffers is looked at. */
export const CHECK_INTERVAL_MS = 50;
/** Growth of Buffer memory since the last collection that starts another one. */
export const COLLECT_AFTER_GROWTH_BYTES = 24 * 1024 * 1024;

/**
 * The pacer's decision, apart from timers and V8 so that it can be tested: `check()` reads the
 * Buffer memory and runs a collection when it has grown by `growthBytes` since the last one (or
 * since the lowest point V8's own collections left).
 */
export class BufferMemoryPacer {
  private floor: number;
  collections = 0;

  constructor(
    private readonly heldBytes: () => number,
    private readonly collect: () => void,
    private readonly growthBytes = COLLECT_AFTER_GROWTH_BYTES,
  ) {
    this.floor = heldBytes();
  }

  check(): void {
    const held = this.heldBytes();
    if (held < this.floor) {
      this.floor = held; // V8 collected by itself
      return;
    }
    if (held - this.floor >= this.growthBytes) {
      this.collect();
      this.collections += 1;
      // What survives is live data: count growth from there.
      this.floor = this.heldBytes();
    }
  }
}

/** V8's gc(), obtained without the --expose-gc command-line flag; null where that fails. */
function fullCollection(): (() => void) | null {
  try {
    setFlagsFromString('--expose-gc');
    return runInNewContext('gc') as () => void;
  } catch {
    return null;
  }
}

/**
 * Bounds the memory that dead Buffers hold while large data streams through the process
 * (uploads spooled to disk, pieces to and from the database, MTOM answers). Every socket or
 * database read allocates a new Buffer outside V8's heap; V8 collects them only once that memory
 * has grown by about 64 MiB, and malloc keeps the pages, so one 100 MiB transfer left the
 * process about 70 MiB larger. A full collection whenever Buffer memory has grown by 24 MiB keeps
 * it to about that: young-generation collections do not free them (the Buffers outlive one). Only a
 * sustained stream of data triggers it; small requests never do. Returns a stop function.
 */
export function startBufferMemoryPacer(): () => void {
  const collect = fullCollection();
  if (!collect) {
    return () => undefined;
  }
  const pacer = new BufferMemoryPacer(() => process.memoryUsage().arrayBuffers, collect);
  const timer = setInterval(() => pacer.check(), CHECK_INTERVAL_MS);
  timer.unref();
  return () => clearInterval(timer);
}
