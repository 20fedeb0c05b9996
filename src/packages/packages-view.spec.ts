import { renderRepresentation } from '../common/representation/rest-representation';
import { PackagesRepresentation, PackageView } from './packages-view';

const T = new Date('2026-11-25T10:00:00.000Z');

function upload(nodes: PackageView['nodes']): PackageView {
  return {
    applicationName: 'demo',
    name: 'mytools',
    version: '1.2.0',
    sha256: '9f2c',
    installedBy: 'user:root',
    installedTime: T,
    nodes,
  };
}

describe('packages', () => {
  const failed = {
    node: 'node-b:977:5a6b7c8d',
    state: 'failed' as const,
    reportedTime: T,
    output: 'ERROR: dependency missing',
  };
  const installed = {
    node: 'node-a:1:2',
    state: 'installed' as const,
    reportedTime: T,
    output: null,
  };

  it("renders plain JSON with packages and each one's nodes as arrays, R's output as a string", () => {
    expect(
      JSON.parse(
        renderRepresentation(new PackagesRepresentation([upload([failed]), upload([])]), 'json'),
      ),
    ).toEqual({
      packages: [
        {
          name: 'mytools',
          applicationName: 'demo',
          version: '1.2.0',
          sha256: '9f2c',
          installedBy: 'user:root',
          installedTime: '2026-11-25T10:00:00.000Z',
          nodes: [
            {
              name: 'node-b:977:5a6b7c8d',
              state: 'failed',
              reportedTime: '2026-11-25T10:00:00.000Z',
              output: 'ERROR: dependency missing',
            },
          ],
        },
        expect.objectContaining({ nodes: [] }),
      ],
    });
    expect(renderRepresentation(new PackagesRepresentation([]), 'json')).toBe('{"packages":[]}');
  });

  it('renders mapped JSON by the one-object-vs-array rule', () => {
    const mapped = JSON.parse(
      renderRepresentation(
        new PackagesRepresentation([upload([installed, failed])]),
        'mapped-json',
      ),
    ) as { packages: { package: { node: unknown[] } } };
    expect(mapped.packages.package.node).toHaveLength(2);
    expect(renderRepresentation(new PackagesRepresentation([]), 'mapped-json')).toBe(
      '{"packages":""}',
    );
  });
});
