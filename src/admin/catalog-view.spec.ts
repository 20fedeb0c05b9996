import { renderRepresentation } from '../common/representation/rest-representation';
import { CatalogRepresentation, CatalogView } from './catalog-view';

const BASE = 'http://localhost:8888/svc/api/rest';

const VIEW: CatalogView = {
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
};
const SECTIONS = new CatalogRepresentation(VIEW);

describe('catalog', () => {
  it('renders directories and files in plain JSON as arrays, whatever their length', () => {
    // The view's own shape: the plain form hides nothing and adds nothing.
    expect(JSON.parse(renderRepresentation(SECTIONS, 'json'))).toEqual(VIEW);
    expect(renderRepresentation(new CatalogRepresentation({ directories: [] }), 'json')).toBe(
      '{"directories":[]}',
    );
  });

  it('renders directories and files in mapped JSON by the one-object-vs-array rule', () => {
    const json = JSON.parse(renderRepresentation(SECTIONS, 'mapped-json'));
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
    expect(
      renderRepresentation(new CatalogRepresentation({ directories: [] }), 'mapped-json'),
    ).toBe('{"catalog":""}');
  });
});
