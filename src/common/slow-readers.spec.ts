import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { watchSlowReader } from './slow-readers';

/** A socket whose writes are taken or not, as the test says; `cuts` counts its destroys. */
function fakeSocket(): Socket & { full: boolean; cuts: number } {
  const socket = Object.assign(new EventEmitter(), {
    full: false,
    destroyed: false,
    cuts: 0,
    write: (): boolean => !socket.full,
    destroy: () => {
      socket.destroyed = true;
      socket.cuts += 1;
    },
  });
  return socket as unknown as Socket & { full: boolean; cuts: number };
}

describe('watchSlowReader', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('cuts a connection whose buffer stays full for the limit, from the first write that filled it', () => {
    const socket = fakeSocket();
    watchSlowReader(socket, 2000);
    expect(socket.write('taken')).toBe(true);
    jest.advanceTimersByTime(10_000);
    expect(socket.cuts).toBe(0);
    socket.full = true;
    expect(socket.write('waits')).toBe(false);
    jest.advanceTimersByTime(1000);
    // Further writes do not restart the clock.
    socket.write('waits too');
    jest.advanceTimersByTime(999);
    expect(socket.cuts).toBe(0);
    jest.advanceTimersByTime(1);
    expect(socket.cuts).toBe(1);
  });

  it('spares a reader that drains in time, and starts again at the next full write', () => {
    const socket = fakeSocket();
    watchSlowReader(socket, 2000);
    socket.full = true;
    socket.write('waits');
    jest.advanceTimersByTime(1999);
    socket.emit('drain');
    jest.advanceTimersByTime(10_000);
    expect(socket.cuts).toBe(0);
    socket.write('waits again');
    jest.advanceTimersByTime(2000);
    expect(socket.cuts).toBe(1);
  });

  it('stops the clock when the connection closes', () => {
    const socket = fakeSocket();
    watchSlowReader(socket, 2000);
    socket.full = true;
    socket.write('waits');
    socket.emit('close');
    jest.advanceTimersByTime(5000);
    expect(socket.cuts).toBe(0);
  });
});
