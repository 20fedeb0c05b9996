import { Injectable } from '@nestjs/common';
import { DatabaseEvents, type OtherNodes } from '../storage/database-events.service';

/** Channel of the notification sent with every catalog change; the payload is `<application>/<section>`. */
export const CATALOG_CHANGED_CHANNEL = 'svc_catalog_changed';

/** `<application>/<section>` of a catalog change, or null: changes may have been missed. */
export type CatalogChangeListener = (
  change: { application: string; section: string } | null,
) => void;

/**
 * Catalog changes on the node's DatabaseEvents. The statements that change the catalog (or the
 * R packages, section R_PACKAGES) notify CATALOG_CHANGED_CHANNEL themselves, after `prefix`, so
 * that every node learns of a change whichever node or command made it; the node that made it
 * reports it here at once (changed) and ignores the echo.
 */
@Injectable()
export class CatalogChanges {
  constructor(private readonly events: DatabaseEvents) {}

  /** What this node's statements put before the payloads they notify. */
  get prefix(): string {
    return this.events.prefix;
  }

  /** How other nodes' changes reach this node (none heard: compare the catalog instead). */
  get otherNodes(): OtherNodes {
    return this.events.otherNodes;
  }

  /** Called after a statement that changed `<application>/<section>` (and notified) committed. */
  changed(application: string, section: string): void {
    this.events.deliverHere(CATALOG_CHANGED_CHANNEL, `${application}/${section}`);
  }

  /**
   * Calls `listener` with every change from now on, and with null each time the LISTEN
   * connection is (re)established (changes made meanwhile were not heard). Returns unsubscribe.
   */
  subscribe(listener: CatalogChangeListener): () => void {
    const unsubscribe = [
      this.events.subscribe(CATALOG_CHANGED_CHANNEL, (payload) => {
        const [application, section] = payload.split('/');
        if (application && section) {
          listener({ application, section });
        }
      }),
      this.events.onListening(() => listener(null)),
    ];
    return () => unsubscribe.forEach((stop) => stop());
  }

  /** Resolves once the node listens for other nodes' changes (after the first attempt). */
  listen(): Promise<void> {
    return this.events.listen();
  }

  /** Calls `listener` each time the LISTEN connection is lost. Returns unsubscribe. */
  onLost(listener: () => void): () => void {
    return this.events.onLost(listener);
  }
}
