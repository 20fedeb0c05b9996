import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Injectable } from '@nestjs/common';
import { PROJECT_ROOT_DIR } from '../config/app-config';
import { xmlAttributeValue } from '../common/representation/xml-text';

/** The folder whose files are served at /svc/wsdl/<file> (SPEC §7). */
export const WSDL_DIR = join(PROJECT_ROOT_DIR, 'wsdl');
export const WSDL_FILE = 'svc-jobs.wsdl';
export const WSDL_PATH_PREFIX = '/svc/wsdl';
export const SOAP_ENDPOINT_PATH = '/svc/api/soap/mtom-jobs';

/**
 * The two attribute values of `wsdl/svc-jobs.wsdl` that the service replaces when it serves the
 * file: the endpoint address and the schema import. Everything else is served byte for byte.
 */
export const FILE_ADDRESS = 'location="http://localhost:8888/svc/api/soap/mtom-jobs"';
export const FILE_SCHEMA_LOCATION = 'schemaLocation="soap-data.xsd"';

function countOf(text: string, part: string): number {
  return text.split(part).length - 1;
}

/** The WSDL and schemas of `wsdl/`, read once at start-up. */
@Injectable()
export class WsdlService {
  private readonly files = new Map<string, Buffer>();
  private readonly wsdlText: string;

  constructor() {
    for (const name of readdirSync(WSDL_DIR)) {
      if (/\.(wsdl|xsd)$/.test(name)) {
        this.files.set(name, readFileSync(join(WSDL_DIR, name)));
      }
    }
    this.wsdlText = this.files.get(WSDL_FILE)?.toString('utf8') ?? '';
    // A WSDL edited so that the replaced values are gone (or doubled) would be served with a
    // wrong address: refuse to start instead.
    if (
      countOf(this.wsdlText, FILE_ADDRESS) !== 1 ||
      countOf(this.wsdlText, FILE_SCHEMA_LOCATION) !== 1
    ) {
      throw new Error(
        `${join(WSDL_DIR, WSDL_FILE)} must contain ${FILE_ADDRESS} and ${FILE_SCHEMA_LOCATION} ` +
          'exactly once each: the service replaces them with its public URLs',
      );
    }
  }

  /** Names of the files served under /svc/wsdl/. */
  fileNames(): string[] {
    return [...this.files.keys()].sort();
  }

  /**
   * The WSDL as served: the endpoint address and the schema location are absolute URLs under
   * the public base URL, so a client generated from the WSDL URL alone reaches both.
   */
  wsdl(publicBase: string): string {
    return this.wsdlText
      .replace(FILE_ADDRESS, `location="${xmlAttributeValue(publicBase + SOAP_ENDPOINT_PATH)}"`)
      .replace(
        FILE_SCHEMA_LOCATION,
        `schemaLocation="${xmlAttributeValue(`${publicBase}${WSDL_PATH_PREFIX}/soap-data.xsd`)}"`,
      );
  }

  /** A file of `wsdl/` (the WSDL itself as {@link wsdl} serves it); undefined when unknown. */
  file(name: string, publicBase: string): Buffer | undefined {
    if (name === WSDL_FILE) {
      return Buffer.from(this.wsdl(publicBase), 'utf8');
    }
    return this.files.get(name);
  }
}
