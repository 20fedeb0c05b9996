import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/**
 * The modules' imports run one way (docs/architecture.md, "The map"): each module imports only
 * modules on the map's rows below its own, and none imports one that imports it back, directly or
 * through others. A failure names the files involved.
 */
const SRC = __dirname;
const ARCHITECTURE = join(SRC, '..', 'docs', 'architecture.md');

/** The map's rows, from the top: the modules each row names (`jobs/` -> jobs). */
function mapRows(): string[][] {
  const text = readFileSync(ARCHITECTURE, 'utf8');
  const section = text.split('\n## The map\n')[1]?.split('\n## ')[0] ?? '';
  return section
    .split('\n')
    .filter((line) => /^\| [^|]+ \| `/.test(line))
    .map((line) =>
      [...(line.split('|')[2] ?? '').matchAll(/`([^`]+)`/g)].map((match) =>
        match[1].replace(/\/$/, '').replace(/\.ts$/, ''),
      ),
    );
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      return sourceFiles(path);
    }
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts') ? [path] : [];
  });
}

/** The module a file of src/ belongs to: its first folder, or the file itself at the top. */
function moduleOf(path: string): string {
  const [first, ...rest] = relative(SRC, path).split('/');
  return rest.length > 0 ? first : first.replace(/\.ts$/, '');
}

/** Module -> module -> one file-to-file import that ties them, for the message. */
function moduleImports(): Map<string, Map<string, string>> {
  const graph = new Map<string, Map<string, string>>();
  for (const file of sourceFiles(SRC)) {
    const text = readFileSync(file, 'utf8');
    for (const match of text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)) {
      const target = resolve(dirname(file), match[1]);
      if (relative(SRC, target).startsWith('..')) {
        continue; // migrations/ and the like: outside the modules
      }
      const [from, to] = [moduleOf(file), moduleOf(target)];
      if (from !== to) {
        const edges = graph.get(from) ?? new Map<string, string>();
        edges.set(to, edges.get(to) ?? `${relative(SRC, file)} -> ${relative(SRC, target)}`);
        graph.set(from, edges);
      }
    }
  }
  return graph;
}

/** The groups of modules that reach each other (Tarjan), only those of two or more. */
function circles(graph: Map<string, Map<string, string>>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const found: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, index.size);
    low.set(node, index.get(node) ?? 0);
    stack.push(node);
    for (const next of graph.get(node)?.keys() ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node) ?? 0, low.get(next) ?? 0));
      } else if (stack.includes(next)) {
        low.set(node, Math.min(low.get(node) ?? 0, index.get(next) ?? 0));
      }
    }
    if (low.get(node) === index.get(node)) {
      const group: string[] = [];
      let member: string | undefined;
      do {
        member = stack.pop();
        if (member !== undefined) {
          group.push(member);
        }
      } while (member !== undefined && member !== node);
      if (group.length > 1) {
        found.push(group.sort());
      }
    }
  };
  for (const node of graph.keys()) {
    if (!index.has(node)) {
      visit(node);
    }
  }
  return found;
}

describe('the modules of src/', () => {
  it('import one another one way only: no module reaches back to one that imports it', () => {
    const graph = moduleImports();
    const ties = circles(graph).map((group) =>
      group.flatMap((from) =>
        [...(graph.get(from) ?? new Map<string, string>())]
          .filter(([to]) => group.includes(to))
          .map(([to, files]) => `${from} -> ${to} (${files})`),
      ),
    );
    expect(ties).toEqual([]);
  });

  it('import only modules on the rows of the map below their own, and every module is on the map', () => {
    const rows = mapRows();
    const rowOf = new Map(rows.flatMap((modules, row) => modules.map((name) => [name, row])));
    expect(rows.length).toBeGreaterThan(5);
    const named = rows.flat();
    expect(named.filter((name, index) => named.indexOf(name) !== index)).toEqual([]);
    const graph = moduleImports();
    const modules = new Set([
      ...graph.keys(),
      ...[...graph.values()].flatMap((to) => [...to.keys()]),
    ]);
    expect([...modules].filter((name) => !rowOf.has(name)).sort()).toEqual([]);
    const upOrSideways = [...graph].flatMap(([from, edges]) =>
      [...edges]
        .filter(([to]) => (rowOf.get(to) ?? Infinity) <= (rowOf.get(from) ?? -1))
        .map(([to, files]) => `${from} -> ${to} (${files})`),
    );
    expect(upOrSideways).toEqual([]);
  });

  it('the storage module knows no feature: the entity list is given to it by the composition root', () => {
    const storage = moduleImports().get('storage') ?? new Map<string, string>();
    // Only the rows below it, none of them a feature: settings, and the foundation (the back-off).
    expect([...storage.keys()].sort()).toEqual(['common', 'config']);
  });
});
