import { Injectable, Logger, OnModuleInit, Optional } from '@nestjs/common';
import type { Request } from 'express';
import { ApiKeysService } from '../api-keys/api-keys.service';
import { AccessPolicyService, type AccessQuestion } from './access-policy.service';
import { type Principal, principalOf } from './principal';
import { RequestAccessService } from './request-access.service';

const QUESTION = Symbol('accessQuestion');
type RequestWithQuestion = Request & { [QUESTION]?: AccessQuestion };

/** Keeps the question the access guard asked of a request, so that it can be asked again. */
export function rememberAccessQuestion(req: Request, question: AccessQuestion): void {
  (req as RequestWithQuestion)[QUESTION] = question;
}

/** What a holder requires of its caller beyond its route's rule: why not now, or null. */
export type FurtherCheck = (principal: Principal | null) => string | null;

interface Holder {
  req: Request;
  further: FurtherCheck | undefined;
  end: (reason: string) => void;
}

/**
 * The long-lived things a request keeps open under the right it was let in with (its event
 * streams, its downloads), re-checked whenever rights change on this node: an application's
 * rights and settings applied (ApplicationSettingsService, for a change made here or heard from
 * another node), an API key revoked (the notice that drops it from every node's cache), or the
 * node's LISTEN connection back (notices may have been lost). Each is checked with the same rule
 * that let it in: the caller's credentials checked again (a key revoked, a session ended, a
 * token expired), then the access guard's question asked again of the policy, then what its
 * holder requires further (the console's applications). A holder whose caller fails is ended,
 * with the reason (docs/security.md#rights-that-change-while-a-stream-is-open).
 */
@Injectable()
export class HeldRights implements OnModuleInit {
  private readonly logger = new Logger('Security');
  private readonly holders = new Set<Holder>();
  private checking: Promise<void> | null = null;
  private again = false;

  constructor(
    private readonly policy: AccessPolicyService,
    private readonly access: RequestAccessService,
    /** Keys made at run time (absent where the API is not loaded). */
    @Optional() private readonly keys?: ApiKeysService,
  ) {}

  onModuleInit(): void {
    this.keys?.onChanged(() => this.changed());
  }

  /** How many holders are open on this node. */
  get open(): number {
    return this.holders.size;
  }

  /**
   * Holds `req`'s right until the returned release is called; `end` is called once, with the
   * reason, should the caller lose it first.
   */
  hold(req: Request, end: (reason: string) => void, further?: FurtherCheck): () => void {
    const holder: Holder = { req, further, end };
    this.holders.add(holder);
    return () => {
      this.holders.delete(holder);
    };
  }

  /** Rights changed: every holder is checked again (one pass at a time; changes meanwhile make one more). */
  changed(): void {
    if (this.checking) {
      this.again = true;
      return;
    }
    this.checking = this.checkAll().finally(() => {
      this.checking = null;
    });
  }

  /** Why `req`'s caller no longer has the right it was let in with, or null when it has. */
  async whyNot(req: Request, further?: FurtherCheck): Promise<string | null> {
    const before = principalOf(req);
    // Not authenticated when let in (AUTH_MODE=none): there are no credentials to check.
    const now = before === undefined ? null : await this.access.recheck(req);
    if (now !== null && 'refused' in now) {
      return `the credentials it was opened with no longer hold (${now.refused})`;
    }
    if ((before?.id ?? null) !== (now?.id ?? null)) {
      return 'the credentials it was opened with now name another caller';
    }
    const question = (req as RequestWithQuestion)[QUESTION];
    if (question !== undefined && this.policy.decide(now, question).outcome !== 'allow') {
      return 'its caller no longer has the right to it';
    }
    return further?.(now) ?? null;
  }

  private async checkAll(): Promise<void> {
    do {
      this.again = false;
      for (const holder of [...this.holders]) {
        let reason: string | null;
        try {
          reason = await this.whyNot(holder.req, holder.further);
        } catch (error) {
          // Checked again with the next change; a failed look-up ends nothing.
          this.logger.warn(
            `an open stream's right could not be checked: ${(error as Error).message}`,
          );
          continue;
        }
        if (reason !== null && this.holders.delete(holder)) {
          holder.end(reason);
        }
      }
    } while (this.again);
  }
}
