import { LookupAddress } from 'node:dns';
import { isIP, LookupFunction } from 'node:net';
import { Injectable } from '@nestjs/common';
import { ApiError } from '../common/api-error';
import { ApplicationsConfig } from '../config/config-slices';
import { applicationSettingsOf } from '../config/application-settings';
import { HostLookup } from './host-lookup';
import { nonPublicReason } from './public-address';

/** The header (REST) and form field (upload) that name a job's callback URL. */
export const CALLBACK_URL_HEADER = 'X-SVC-Callback-Url';

const MAX_URL_LENGTH = 2048;

/** A host name as compared with the allow-list: lower case, no IPv6 brackets, no final dot. */
function normalHost(host: string): string {
  return host
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '');
}

/** How the allow-list admits `host`: named exactly, by a `*` / `*.domain` pattern, or not at all. */
export function allowListMatch(host: string, allowList: string[]): 'exact' | 'pattern' | null {
  const wanted = normalHost(host);
  const entries = allowList.map(normalHost);
  if (entries.includes(wanted)) {
    return 'exact';
  }
  const byPattern = entries.some(
    (entry) =>
      entry === '*' ||
      (entry.startsWith('*.') && wanted.endsWith(entry.slice(1)) && wanted !== entry.slice(2)),
  );
  return byPattern ? 'pattern' : null;
}

/**
 * Where one attempt may POST: the URL, and a `lookup` that answers its host with the addresses it
 * had when it was checked, so a name cannot answer a public address to the check and a private
 * one to the connection (undefined for an IP literal host, which is not looked up).
 */
export interface CallbackDestination {
  url: URL;
  lookup: LookupFunction | undefined;
}

/**
 * Checks the callback URL a job names, at submission and again before each attempt
 * (docs/api.md#job-callbacks, docs/security.md#callbacks): an absolute http(s) URL without
 * credentials, of an application that has a callback secret, whose host is on the application's
 * `callbackHosts`. A host admitted only by a pattern must be public: an IP literal or every
 * address it resolves to outside the non-public ranges, IPv6 addresses that carry an IPv4
 * address judged by that IPv4 address, so a wildcard cannot be used to reach the service's own
 * network.
 */
@Injectable()
export class CallbackUrlPolicy {
  constructor(
    private readonly applications: ApplicationsConfig,
    private readonly hosts: HostLookup,
  ) {}

  /**
   * The URL to store; throws a 400 ApiError saying what is wrong, naming the URL as `field`
   * (the header by default; a schedule's JSON field).
   */
  async check(
    applicationName: string,
    value: string,
    field: string = CALLBACK_URL_HEADER,
  ): Promise<string> {
    return (await this.admit(applicationName, value, field, false)).url.toString();
  }

  /**
   * The destination of an attempt, checked now (the allow-list may have changed, a name may
   * resolve elsewhere); throws the 400 ApiError of `check` when it no longer passes. A host name
   * is resolved here, named exactly or not, and the connection is pinned to its answer.
   */
  destination(applicationName: string, url: string): Promise<CallbackDestination> {
    return this.admit(applicationName, url, CALLBACK_URL_HEADER, true);
  }

  private async admit(
    applicationName: string,
    value: string,
    field: string,
    resolveNames: boolean,
  ): Promise<CallbackDestination> {
    const text = value.trim();
    if (text.length > MAX_URL_LENGTH) {
      throw ApiError.badRequest(`${field} is longer than ${MAX_URL_LENGTH} characters.`);
    }
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      throw ApiError.badRequest(`${field} is not an absolute URL.`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw ApiError.badRequest(`${field} must be an http or https URL.`);
    }
    if (url.username !== '' || url.password !== '') {
      throw ApiError.badRequest(`${field} must not carry credentials.`);
    }
    const settings = applicationSettingsOf(this.applications, applicationName);
    if (settings.callbackSecret === null) {
      throw ApiError.badRequest(
        `Application ${applicationName} has no callback secret configured, so it takes no callbacks.`,
      );
    }
    const match = allowListMatch(url.hostname, settings.callbackHosts);
    if (match === null) {
      throw ApiError.badRequest(
        `The callback host ${url.hostname} is not on the callback hosts of application ${applicationName}.`,
      );
    }
    const host = normalHost(url.hostname);
    if (isIP(host) !== 0) {
      if (match === 'pattern') {
        refuseNonPublic(host, [host]);
      }
      return { url, lookup: undefined };
    }
    if (match === 'exact' && !resolveNames) {
      return { url, lookup: undefined };
    }
    let addresses: LookupAddress[];
    try {
      addresses = await this.hosts.addresses(host);
    } catch {
      throw ApiError.badRequest(`The callback host ${host} cannot be resolved.`);
    }
    if (addresses.length === 0) {
      throw ApiError.badRequest(`The callback host ${host} cannot be resolved.`);
    }
    if (match === 'pattern') {
      refuseNonPublic(
        host,
        addresses.map((a) => a.address),
      );
    }
    return { url, lookup: pinnedLookup(host, addresses) };
  }
}

/** Throws the 400 for a pattern-admitted host any of whose addresses is not public. */
function refuseNonPublic(host: string, addresses: string[]): void {
  for (const address of addresses) {
    const reason = nonPublicReason(address);
    if (reason !== null) {
      throw ApiError.badRequest(
        `The callback host ${host} is a loopback, private or link-local address (or resolves to ` +
          `one: ${reason}); such a host must be named exactly in the callback hosts.`,
      );
    }
  }
}

/**
 * A `lookup` for the connection that answers `host` with the addresses checked, never asking
 * the resolver again; any other name is refused. Node asks with `all` when it tries several
 * addresses (autoSelectFamily), and for one family when told to.
 */
export function pinnedLookup(host: string, addresses: LookupAddress[]): LookupFunction {
  return (hostname, options, callback) => {
    const family =
      options.family === 4 || options.family === 'IPv4'
        ? 4
        : options.family === 6 || options.family === 'IPv6'
          ? 6
          : 0;
    const answers = addresses.filter((a) => family === 0 || a.family === family);
    if (normalHost(hostname) !== host || answers.length === 0) {
      const error: NodeJS.ErrnoException = new Error(
        `${hostname} has no checked address${family === 0 ? '' : ` of family IPv${family}`}`,
      );
      error.code = 'ENOTFOUND';
      callback(error, '', 0);
      return;
    }
    if (options.all) {
      callback(null, answers);
    } else {
      callback(null, answers[0].address, answers[0].family);
    }
  };
}
