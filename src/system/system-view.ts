import type { RestElement, RestView } from '../common/representation/rest-representation';

export interface NodeInformationView {
  name: string;
  healthy: boolean;
  /** Milliseconds. */
  uptime: number;
  uptimeText: string;
  serverInfo: string;
  version: string;
  rEngine: 'native' | 'webr';
  rVersion: string;
  /** What isolates R code on this node: bwrap, none, or webassembly (webR). */
  rSandbox: 'bwrap' | 'none' | 'webassembly';
  /** Bytes. */
  maxMemory: number;
  /** Bytes. */
  freeMemory: number;
  osLoadAverage: number;
}

/** `nodeInformation` (GET /system/info): every value an attribute. */
export class NodeInformationRepresentation implements RestView {
  constructor(private readonly view: NodeInformationView) {}

  toElement(): RestElement {
    const v = this.view;
    return {
      name: 'nodeInformation',
      attributes: {
        name: v.name,
        healthy: v.healthy,
        // xs:long: a fractional count (process.uptime() * 1000) would make the XML invalid.
        uptime: Math.trunc(v.uptime),
        uptimeText: v.uptimeText,
        serverInfo: v.serverInfo,
        version: v.version,
        rEngine: v.rEngine,
        rVersion: v.rVersion,
        rSandbox: v.rSandbox,
        maxMemory: Math.trunc(v.maxMemory),
        freeMemory: Math.trunc(v.freeMemory),
        osLoadAverage: v.osLoadAverage,
      },
    };
  }
}
