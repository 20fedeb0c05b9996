import type { RestElement, RestView } from '../common/representation/rest-representation';

/** An application's catalog (GET /admin/catalog): its sections and their files. */
export interface CatalogView {
  directories: { type: string; files: { name: string; dataUri: string }[] }[];
}

/** `catalog`: a `directory` per section, a `file` per file in it. */
export class CatalogRepresentation implements RestView {
  constructor(private readonly view: CatalogView) {}

  toElement(): RestElement {
    return {
      name: 'catalog',
      attributes: {},
      lists: { directory: 'directories' },
      children: this.view.directories.map((directory) => ({
        name: 'directory',
        attributes: { type: directory.type },
        lists: { file: 'files' },
        children: directory.files.map((file) => ({
          name: 'file',
          attributes: { name: file.name, dataUri: file.dataUri },
        })),
      })),
    };
  }
}
