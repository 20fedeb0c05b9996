import { DataSource } from 'typeorm';
import { DatabaseEvents } from '../../src/storage/database-events.service';
import type { DatabaseTarget } from '../../src/storage/database-options';
import { NodeIdentity } from '../../src/storage/node-identity';

/**
 * A node's real DatabaseEvents for a test that needs no database: on the embedded target (the
 * default) it delivers in-process only, and behind a pooler (no listenUrl) it hears no other
 * node; neither sends anything until publish, so its DataSource is never opened.
 */
export function inProcessEvents(
  target: DatabaseTarget = { kind: 'embedded', socketDirectory: '' },
  node = new NodeIdentity(),
): DatabaseEvents {
  return new DatabaseEvents(target, node, new DataSource({ type: 'postgres' }));
}
