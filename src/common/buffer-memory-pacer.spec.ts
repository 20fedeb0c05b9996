import { BufferMemoryPacer } from './buffer-memory-pacer';

const MiB = 1024 * 1024;

/** A process whose Buffer memory the test sets, and whose collections free the dead part. */
function fakeMemory(): { held: number; live: number; collect: () => void } {
  const memory = {
    held: 10 * MiB,
    live: 10 * MiB,
    collect: () => {
      memory.held = memory.live;
    },
  };
  return memory;
}

describe('BufferMemoryPacer', () => {
  it('collects once Buffer memory has grown by the threshold, not before', () => {
    const memory = fakeMemory();
    const pacer = new BufferMemoryPacer(() => memory.held, memory.collect, 8 * MiB);
    memory.held += 7 * MiB;
    pacer.check();
    expect(pacer.collections).toBe(0);
    memory.held += 1 * MiB;
    pacer.check();
    expect(pacer.collections).toBe(1);
    expect(memory.held).toBe(10 * MiB);
  });

  it('counts growth from what survived a collection: live data does not cause a collection each time', () => {
    const memory = fakeMemory();
    const pacer = new BufferMemoryPacer(() => memory.held, memory.collect, 8 * MiB);
    memory.live = 30 * MiB; // 20 MiB of it still in use
    memory.held = 30 * MiB;
    pacer.check();
    expect(pacer.collections).toBe(1);
    memory.held = 35 * MiB;
    pacer.check();
    expect(pacer.collections).toBe(1);
    memory.held = 38 * MiB;
    pacer.check();
    expect(pacer.collections).toBe(2);
  });

  it('follows V8 own collections down, so steady small traffic never triggers one', () => {
    const memory = fakeMemory();
    const pacer = new BufferMemoryPacer(() => memory.held, memory.collect, 8 * MiB);
    for (let i = 0; i < 100; i++) {
      memory.held = 10 * MiB + (i % 5) * MiB; // grows by 4 MiB, then V8 frees it
      pacer.check();
    }
    expect(pacer.collections).toBe(0);
    memory.held = 2 * MiB; // V8 freed more than the start
    pacer.check();
    memory.held = 10 * MiB;
    pacer.check();
    expect(pacer.collections).toBe(1);
  });
});
