import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { Injectable } from '@nestjs/common';

/**
 * This service instance's id among the nodes sharing the database: it owns leases, signs its
 * reports and marks what it announced. Host and process name it for a reader; the random part
 * keeps two instances in one process (tests) apart.
 */
@Injectable()
export class NodeIdentity {
  readonly id = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
}
