import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { Injectable } from '@nestjs/common';
import { ApiError } from '../common/api-error';
import { ApplicationsConfig } from '../config/config-slices';
import { applicationSettingsOf } from '../config/application-settings';

/** The header (REST) and form field (upload) that name a job's callback URL. */
export const CALLBACK_URL_HEADER = 'X-SVC-Callback-Url';

const MAX_URL_LENGTH = 2048;

/**
 * Addresses a callback must not reach unless its host is named exactly in the allow-list: the
 * service's own host and networks behind it (loopback, private, link-local with cloud metadata
 * services, unspecified, carrier-grade NAT, multicast, reserved).
 */
const NON_PUBLIC = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  NON_PUBLIC.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  NON_PUBLIC.addSubnet(network, prefix, 'ipv6');
}

/** True for an address in a loopback, private, link-local or otherwise non-public range. */
export function isNonPublicAddress(address: string): boolean {
  // An IPv4-mapped IPv6 address (::ffff:127.0.0.1) reaches the IPv4 address it carries.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) {
    return NON_PUBLIC.check(mapped[1], 'ipv4');
  }
  const family = isIP(address);
  if (family === 0) {
    return true; // not an address at all: never trusted
  }
  return NON_PUBLIC.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

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
 * Checks the callback URL a job names, at submission (docs/api.md#job-callbacks): an absolute
 * http(s) URL without credentials, of an application that has a callback secret, whose host is
 * on the application's `callbackHosts`. A host admitted only by a pattern must be public: an IP
 * literal or every address it resolves to outside the non-public ranges, so a wildcard cannot
 * be used to reach the service's own network.
 */
@Injectable()
export class CallbackUrlPolicy {
  constructor(private readonly applications: ApplicationsConfig) {}

  /**
   * The URL to store; throws a 400 ApiError saying what is wrong, naming the URL as `field`
   * (the header by default; a schedule's JSON field).
   */
  async check(
    applicationName: string,
    value: string,
    field: string = CALLBACK_URL_HEADER,
  ): Promise<string> {
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
    if (match === 'pattern') {
      await this.checkPublic(normalHost(url.hostname));
    }
    return url.toString();
  }

  private async checkPublic(host: string): Promise<void> {
    let addresses: string[];
    if (isIP(host) !== 0) {
      addresses = [host];
    } else {
      try {
        addresses = (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
      } catch {
        throw ApiError.badRequest(`The callback host ${host} cannot be resolved.`);
      }
    }
    if (addresses.length === 0 || addresses.some(isNonPublicAddress)) {
      throw ApiError.badRequest(
        `The callback host ${host} is a loopback, private or link-local address (or resolves to ` +
          'one); such a host must be named exactly in the callback hosts.',
      );
    }
  }
}
