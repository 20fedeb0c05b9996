import { renderRepresentation } from '../common/representation/rest-representation';
import { CatalogRepresentation } from './catalog-view';

const BASE = 'http://localhost:8888/svc/api/rest';

describe('catalog', () => {
  it('renders directories and files in JSON by the one-object-vs-array rule', () => {
    const json = JSON.parse(
      renderRepresentation(
        new CatalogRepresentation({
          directories: [
            { type: 'R_SCRIPTS', files: [{ name: 'a.R', dataUri: `${BASE}/a.R` }] },
            {
              type: 'R_FUNCTIONS',
              files: [
                { name: 'f.R', dataUri: `${BASE}/f.R` },
                { name: 'g.R', dataUri: `${BASE}/g.R` },
              ],
            },
            { type: 'EMAIL_REPLIES', files: [] },
          ],
        }),
        'json',
      ),
    );
    expect(json).toEqual({
      catalog: {
        directory: [
          { type: 'R_SCRIPTS', file: { name: 'a.R', dataUri: `${BASE}/a.R` } },
          {
            type: 'R_FUNCTIONS',
            file: [
              { name: 'f.R', dataUri: `${BASE}/f.R` },
              { name: 'g.R', dataUri: `${BASE}/g.R` },
            ],
          },
          { type: 'EMAIL_REPLIES' },
        ],
      },
    });
    expect(renderRepresentation(new CatalogRepresentation({ directories: [] }), 'json')).toBe(
      '{"catalog":""}',
    );
  });
});
