import { Injectable } from '@nestjs/common';
import type { ClaimedJob, JobKind } from './queue.types';

/**
 * A free slot of this node's worker, held for one job that the intake is about to store: the
 * job's statement stores it running under this node's lease when no queued job would have gone
 * before it (QueueRepository.enqueue), and the job then starts in the slot without a claim.
 */
export interface HeldSlot {
  /** The lease owner: this node's worker. */
  readonly owner: string;
  readonly leaseSeconds: number;
  /** The kinds of the slot's pool: while any of them is queued, the job queues behind it. */
  readonly kinds: readonly JobKind[];
  /** The job was stored running under the slot's lease: it runs now. */
  start(job: ClaimedJob): void;
  /** The job was stored queued (or not at all): the slot is free again. */
  release(): void;
}

/** What the node's worker offers the intake (WorkerService). */
export interface SlotHolder {
  /** A free slot for a job of `kind` of `applicationName`, held for `jobId`; null: none. */
  hold(jobId: string, applicationName: string, kind: JobKind): HeldSlot | null;
}

/**
 * The meeting point of the intake and this node's worker, so that a job submitted to an idle
 * worker node starts in the submitting statement instead of waiting for a wake-up and a claim
 * (docs/queue.md "Starting where it is submitted"). A node without a worker (ROLE=api) offers
 * nothing, and every job queues.
 */
@Injectable()
export class DirectStarts {
  private holder: SlotHolder | null = null;

  offer(holder: SlotHolder): void {
    this.holder = holder;
  }

  withdraw(holder: SlotHolder): void {
    if (this.holder === holder) {
      this.holder = null;
    }
  }

  hold(jobId: string, applicationName: string, kind: JobKind): HeldSlot | null {
    return this.holder?.hold(jobId, applicationName, kind) ?? null;
  }
}
