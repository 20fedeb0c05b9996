import { LookupAddress } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { Injectable } from '@nestjs/common';

/**
 * The name resolution callbacks use: every address a host name has now, as the system's
 * resolver answers (getaddrinfo: /etc/hosts, then DNS). A boundary of its own so that the
 * address checked is the address connected to (CallbackUrlPolicy.destination), and so that a
 * test can answer differently on each call, as a hostile name server would.
 */
@Injectable()
export class HostLookup {
  addresses(host: string): Promise<LookupAddress[]> {
    return lookup(host, { all: true, verbatim: true });
  }
}
