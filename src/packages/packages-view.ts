import type { RestElement, RestView } from '../common/representation/rest-representation';

/** One node's install of a package (GET /admin/packages). */
export interface PackageNodeView {
  node: string;
  /** pending: the node has not reported on this upload yet. */
  state: 'installed' | 'failed' | 'unsupported' | 'pending';
  reportedTime: Date;
  /** R's output when the install failed; why, when unsupported. */
  output: string | null;
}

/** An application's R package as uploaded, and what each worker node made of it. */
export interface PackageView {
  applicationName: string;
  name: string;
  version: string;
  sha256: string;
  installedBy: string;
  installedTime: Date;
  nodes: PackageNodeView[];
}

/** `packages`: a `package` per upload, a `node` per report, R's `output` when there is one. */
export class PackagesRepresentation implements RestView {
  constructor(private readonly views: readonly PackageView[]) {}

  toElement(): RestElement {
    return {
      name: 'packages',
      attributes: {},
      lists: { package: 'packages' },
      children: this.views.map((pkg) => ({
        name: 'package',
        attributes: {
          name: pkg.name,
          applicationName: pkg.applicationName,
          version: pkg.version,
          sha256: pkg.sha256,
          installedBy: pkg.installedBy,
          installedTime: pkg.installedTime,
        },
        lists: { node: 'nodes' },
        children: pkg.nodes.map((node) => ({
          name: 'node',
          attributes: { name: node.node, state: node.state, reportedTime: node.reportedTime },
          children:
            node.output === null ? [] : [{ name: 'output', attributes: {}, text: node.output }],
        })),
      })),
    };
  }
}
