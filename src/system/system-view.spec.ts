import { renderRepresentation } from '../common/representation/rest-representation';
import { NodeInformationRepresentation, NodeInformationView } from './system-view';

const nodeInfo: NodeInformationView = {
  name: 'node-1',
  healthy: true,
  uptime: 12345.678,
  uptimeText: '12 seconds',
  serverInfo: 'svc/0.1.0 (Node.js v20)',
  version: '0.1.0',
  rEngine: 'webr',
  rSandbox: 'webassembly',
  rVersion: 'R version 4.4.1',
  maxMemory: 4294967296,
  freeMemory: 1073741824,
  osLoadAverage: 0.25,
};

describe('nodeInformation', () => {
  it('renders in JSON with booleans and numbers as primitives, longs whole', () => {
    const json = JSON.parse(
      renderRepresentation(new NodeInformationRepresentation(nodeInfo), 'mapped-json'),
    );
    expect(json.nodeInformation).toEqual({ ...nodeInfo, uptime: 12345 });
  });
});
