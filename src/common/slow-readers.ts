import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Cuts the connection of every client of `server` that stops taking what the node sends it
 * (docs/security.md, the HTTP edge). A write that finds the connection's buffer full (the
 * socket's `write` answers false: the client's receive window and the kernel's buffers are
 * full) starts a clock; the socket draining stops it; after `limitMs` without draining the
 * connection is destroyed, and with it the answer being written (an event stream, a download,
 * any other) and what it held. One mechanism for every answer, per connection rather than per
 * request, so the hot paths pay nothing more than a wrapped `write`.
 *
 * Producers still respect back-pressure themselves (pipes, EventSink): this only bounds how
 * long a connection that takes nothing may hold what they wait with.
 */
export function cutSlowReaders(server: Server, limitMs: number): void {
  server.on('connection', (socket: Socket) => watchSlowReader(socket, limitMs));
}

/** Destroys `socket` once a write has found it full and it has not drained for `limitMs`. */
export function watchSlowReader(socket: Socket, limitMs: number): void {
  let clock: NodeJS.Timeout | null = null;
  const stop = (): void => {
    if (clock !== null) {
      clearTimeout(clock);
      clock = null;
    }
  };
  const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
  socket.write = (...args: unknown[]): boolean => {
    const taken = write(...args);
    if (!taken && clock === null && !socket.destroyed) {
      clock = setTimeout(() => {
        clock = null;
        socket.destroy();
      }, limitMs);
      clock.unref();
    }
    return taken;
  };
  socket.on('drain', stop);
  socket.once('close', stop);
}
