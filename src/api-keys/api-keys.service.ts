import { randomBytes } from 'node:crypto';
import { Injectable, Logger, OnModuleInit, Optional } from '@nestjs/common';
import { fastSecretHash, fastSecretMatches, randomSecret } from '../common/secret-hash';
import { AuditActor, AuditService } from '../audit/audit.service';
import { DatabaseEvents } from '../storage/database-events.service';
import type { ApiKeyEntity } from './api-key.entity';
import type { NewApiKeyDto } from './new-api-key.dto';
import { API_KEY_CHANGED_CHANNEL, ApiKeyListing, ApiKeyRepository } from './api-key.repository';

/** Compared with for an unknown id; matches no secret anyone has. */
const UNKNOWN_KEY_HASH = fastSecretHash(randomSecret());
/** A key's use is written to the database at most this often per key and node. */
export const LAST_USED_INTERVAL_MS = 60_000;
/** A cached key is read again after this long even without a notification (a safety net). */
const CACHE_MAX_AGE_MS = 60_000;
const MAX_CACHED = 10_000;

/** What checking a stored key gives: who it is, why it is refused, or null: no such stored key. */
export type StoredKeyCheck = { principal: string; roles: string[] } | { refused: string } | null;

export interface CreatedApiKey {
  /** `<keyId>.<secret>`: shown once, stored nowhere. */
  key: string;
  listing: ApiKeyListing;
}

/**
 * API keys made at run time (docs/security.md#api-keys-made-at-run-time): create, list, revoke,
 * and the check the authentication asks for a key id it does not find in API_KEYS.
 *
 * Each node caches the keys it has checked. A revocation notifies every node (the DELETE
 * statement sends it), which drops the key at once; while the LISTEN connection is down, or when
 * other nodes cannot be heard at all (a transaction-mode pooler without DATABASE_LISTEN_URL),
 * nothing is cached and every check reads the row. Expiry is checked on every use.
 */
@Injectable()
export class ApiKeysService implements OnModuleInit {
  private readonly logger = new Logger('Security');
  private readonly cache = new Map<string, { key: ApiKeyEntity; cachedAt: number }>();
  /** Raised by every invalidation: a read that began before one must not fill the cache. */
  private generation = 0;
  private readonly lastUseWritten = new Map<string, number>();
  private readonly changeListeners = new Set<() => void>();

  constructor(
    private readonly repository: ApiKeyRepository,
    @Optional() private readonly events?: DatabaseEvents,
    @Optional() private readonly audit?: AuditService,
  ) {}

  onModuleInit(): void {
    this.events?.subscribe(API_KEY_CHANGED_CHANNEL, (id) => this.forget(id));
    // Notifications sent while the connection was down are lost: start again from the rows.
    this.events?.onListening(() => this.forget(null));
    this.events?.onLost(() => this.forget(null));
  }

  /**
   * `request` is checked (`NewApiKeyDto`); a role named twice is kept once. `actor`: who acts
   * outside of a request (the command line); null: the request's caller.
   */
  async create(
    request: NewApiKeyDto,
    createdBy: string | null,
    actor: AuditActor | null = null,
  ): Promise<CreatedApiKey> {
    const id = `k${randomBytes(8).toString('hex')}`;
    const secret = randomSecret();
    const listing: ApiKeyListing = {
      id,
      principal: request.principal,
      roles: [...new Set(request.roles ?? [])],
      createdAt: new Date(),
      createdBy,
      expiresAt:
        request.expiresAt === undefined || request.expiresAt === null
          ? null
          : new Date(request.expiresAt),
      lastUsedAt: null,
    };
    await this.repository.inTransaction(async (manager) => {
      await this.repository.insert({ ...listing, secretHash: fastSecretHash(secret) }, manager);
      await this.audit?.record(
        {
          action: 'apiKey.created',
          details: {
            keyId: id,
            principal: listing.principal,
            roles: listing.roles,
            expiresAt: listing.expiresAt?.toISOString() ?? null,
          },
        },
        manager,
        actor,
      );
    });
    return { key: `${id}.${secret}`, listing };
  }

  list(): Promise<ApiKeyListing[]> {
    return this.repository.list();
  }

  /** Revokes a key on every node; false when there is no such key. */
  async revoke(id: string, actor: AuditActor | null = null): Promise<boolean> {
    const deleted = await this.repository.inTransaction(async (manager) => {
      const key = await this.repository.delete(id, manager);
      if (key !== null) {
        await this.audit?.record(
          { action: 'apiKey.revoked', details: { keyId: id, principal: key.principal } },
          manager,
          actor,
        );
      }
      return key;
    });
    if (deleted === null) {
      return false;
    }
    this.repository.deleted(id);
    return true;
  }

  async check(id: string, secret: string, now = Date.now()): Promise<StoredKeyCheck> {
    const key = await this.lookup(id, now);
    if (key === null) {
      // The comparison a known id's secret gets, so that both refusals cost the same.
      fastSecretMatches(secret, UNKNOWN_KEY_HASH);
      return null;
    }
    if (!fastSecretMatches(secret, key.secretHash)) {
      return { refused: 'unknown or wrong API key' };
    }
    if (key.expiresAt !== null && key.expiresAt.getTime() <= now) {
      return { refused: 'the API key has expired' };
    }
    await this.noteUse(id, now);
    return { principal: key.principal, roles: key.roles };
  }

  private get cacheUsable(): boolean {
    const events = this.events;
    return (
      events !== undefined &&
      (events.otherNodes === 'single-node' || (events.otherNodes === 'listen' && events.listening))
    );
  }

  private async lookup(id: string, now: number): Promise<ApiKeyEntity | null> {
    const hit = this.cache.get(id);
    if (hit && now - hit.cachedAt < CACHE_MAX_AGE_MS && this.cacheUsable) {
      return hit.key;
    }
    const generation = this.generation;
    const key = await this.repository.find(id);
    if (key !== null && generation === this.generation && this.cacheUsable) {
      if (this.cache.size >= MAX_CACHED) {
        this.cache.clear();
      }
      this.cache.set(id, { key, cachedAt: now });
    }
    return key;
  }

  /**
   * Calls `listener` after each revocation this node hears of (and when revocations may have
   * been missed: the LISTEN connection back or lost), once the key is out of the cache: what a
   * key opened must be checked again. Returns unsubscribe.
   */
  onChanged(listener: () => void): () => void {
    this.changeListeners.add(listener);
    return () => {
      this.changeListeners.delete(listener);
    };
  }

  /** Drops one key (or all, null) from this node's cache. */
  private forget(id: string | null): void {
    this.generation++;
    if (id === null) {
      this.cache.clear();
    } else {
      this.cache.delete(id);
    }
    for (const listener of [...this.changeListeners]) {
      listener();
    }
  }

  /**
   * `last used` without a write per request: at most once a minute per key on this node. The
   * write is awaited, so a listing read after the request sees it; a failed write is logged and
   * never refuses the key.
   */
  private async noteUse(id: string, now: number): Promise<void> {
    const written = this.lastUseWritten.get(id);
    if (written !== undefined && now - written < LAST_USED_INTERVAL_MS) {
      return;
    }
    if (this.lastUseWritten.size >= MAX_CACHED) {
      this.lastUseWritten.clear();
    }
    this.lastUseWritten.set(id, now);
    try {
      await this.repository.touch(id, new Date(now));
    } catch (error) {
      this.logger.warn(`could not record the use of API key ${id}: ${(error as Error).message}`);
    }
  }
}
