import { create } from 'xmlbuilder2';
import type { XMLBuilder } from 'xmlbuilder2/lib/interfaces';
import { ErrorRepresentation } from './error-view';
import {
  isRestView,
  RestElement,
  RestFormat,
  RestListStreamWriter,
  RestView,
  renderRepresentation,
} from './rest-representation';

const DECL = '<?xml version="1.0" encoding="UTF-8"?>';
const NS = 'xmlns="urn:svc:rest:types"';
const T = new Date('2026-11-22T09:16:22.123Z');

/** A list and its items as a feature would define them: attributes of every kind, text, none. */
class ItemView implements RestView {
  constructor(private readonly n: number) {}

  toElement(): RestElement {
    return {
      name: 'item',
      attributes: {
        id: `item-${this.n}`,
        // Markup in a value checks that items are escaped as the whole document would be.
        uri: `http://localhost/items?x="${this.n}"&y=<z>`,
        even: this.n % 2 === 0,
        count: this.n,
        time: new Date(T.getTime() + this.n),
        absent: null,
      },
      children: [{ name: 'note', attributes: {}, text: `note ${this.n} <&>` }],
    };
  }
}

class ItemsView implements RestView {
  constructor(private readonly items: ItemView[]) {}

  toElement(): RestElement {
    return {
      name: 'items',
      attributes: {},
      children: this.items.map((i) => i.toElement()),
      lists: { item: 'items' },
    };
  }
}

const EMPTY_ITEMS = new ItemsView([]).toElement();

describe('renderRepresentation, mapped JSON (application/vnd.svc+json)', () => {
  it('renders an error with a numeric status and the message as a string', () => {
    expect(
      renderRepresentation(
        new ErrorRepresentation({ status: 400, error: 'Bad Request', message: 'no "app"' }),
        'mapped-json',
      ),
    ).toBe('{"error":{"status":400,"error":"Bad Request","message":"no \\"app\\""}}');
  });

  it('renders attributes as keys in order (dates as ISO text, absent ones left out), text children as strings', () => {
    expect(renderRepresentation(new ItemView(2), 'mapped-json')).toBe(
      '{"item":{"id":"item-2","uri":"http://localhost/items?x=\\"2\\"&y=<z>","even":true,' +
        '"count":2,"time":"2026-11-22T09:16:22.125Z","note":"note 2 <&>"}}',
    );
  });

  it('renders no children as "", one as an object, several as an array', () => {
    const render = (n: number): unknown =>
      JSON.parse(
        renderRepresentation(
          new ItemsView(Array.from({ length: n }, (_, i) => new ItemView(i + 1))),
          'mapped-json',
        ),
      );
    expect(render(0)).toEqual({ items: '' });
    expect(render(1)).toEqual({ items: { item: expect.objectContaining({ id: 'item-1' }) } });
    const two = render(2) as { items: { item: unknown[] } };
    expect(Array.isArray(two.items.item)).toBe(true);
    expect(two.items.item).toHaveLength(2);
  });
});

describe('renderRepresentation, plain JSON (application/json)', () => {
  it('renders the root content without its name: attributes typed, text children as strings', () => {
    expect(
      renderRepresentation(
        new ErrorRepresentation({ status: 400, error: 'Bad Request', message: 'no "app"' }),
        'json',
      ),
    ).toBe('{"status":400,"error":"Bad Request","message":"no \\"app\\""}');
    expect(JSON.parse(renderRepresentation(new ItemView(2), 'json'))).toEqual({
      id: 'item-2',
      uri: 'http://localhost/items?x="2"&y=<z>',
      even: true,
      count: 2,
      time: '2026-11-22T09:16:22.125Z',
      note: 'note 2 <&>',
    });
  });

  it('renders a list as an array under its key, whether it has zero, one or several items', () => {
    const render = (n: number): unknown =>
      JSON.parse(
        renderRepresentation(
          new ItemsView(Array.from({ length: n }, (_, i) => new ItemView(i + 1))),
          'json',
        ),
      );
    expect(render(0)).toEqual({ items: [] });
    expect(render(1)).toEqual({ items: [expect.objectContaining({ id: 'item-1', count: 1 })] });
    expect((render(3) as { items: { id: string }[] }).items.map((i) => i.id)).toEqual([
      'item-1',
      'item-2',
      'item-3',
    ]);
  });

  it('renders lists inside items, and an element with nothing in it as an empty object', () => {
    const nested: RestView = {
      toElement: () => ({
        name: 'shelf',
        attributes: { label: 'a' },
        children: [
          { name: 'box', attributes: { n: 1 }, children: [], lists: { thing: 'things' } },
          {
            name: 'box',
            attributes: { n: 2 },
            children: [{ name: 'thing', attributes: {} }],
            lists: { thing: 'things' },
          },
          { name: 'lid', attributes: { open: null } },
        ],
        lists: { box: 'boxes' },
      }),
    };
    expect(JSON.parse(renderRepresentation(nested, 'json'))).toEqual({
      label: 'a',
      boxes: [
        { n: 1, things: [] },
        { n: 2, things: [{}] },
      ],
      lid: {},
    });
  });

  it('refuses a repeated child that is not declared a list, rather than drop one', () => {
    const repeated: RestView = {
      toElement: () => ({
        name: 'pair',
        attributes: {},
        children: [
          { name: 'part', attributes: {}, text: 'a' },
          { name: 'part', attributes: {}, text: 'b' },
        ],
      }),
    };
    expect(() => renderRepresentation(repeated, 'json')).toThrow(
      'pair: repeated part is not declared in lists',
    );
    // The mapped shape has always made them an array.
    expect(renderRepresentation(repeated, 'mapped-json')).toBe('{"pair":{"part":["a","b"]}}');
  });
});

describe('renderRepresentation, XML', () => {
  it('puts the error message in a child element and escapes markup', () => {
    expect(
      renderRepresentation(
        new ErrorRepresentation({ status: 404, error: 'Not Found', message: 'a < b & "c"' }),
        'xml',
      ),
    ).toBe(
      `${DECL}<error ${NS} status="404" error="Not Found"><message>a &lt; b &amp; "c"</message></error>`,
    );
  });

  it('replaces characters XML cannot carry, in text and in attributes', () => {
    const xml = renderRepresentation(
      new ErrorRepresentation({
        status: 500,
        error: 'Internal\u0007 Server Error',
        message: '\u001b[31mError\u0000\ud800 ok\n',
      }),
      'xml',
    );
    expect(xml).toContain('error="Internal\ufffd Server Error"');
    expect(xml).toContain('<message>\ufffd[31mError\ufffd\ufffd ok\n</message>');
  });

  it('renders children without a namespace of their own, inheriting the default one', () => {
    const xml = renderRepresentation(new ItemsView([new ItemView(1)]), 'xml');
    expect(xml).toMatch(new RegExp(`^${escape(DECL)}<items ${NS}><item id="item-1"`));
    expect(xml).toContain('even="false"');
    expect(xml).not.toContain('absent');
    expect(xml.match(/xmlns=/g)).toHaveLength(1);
    expect(renderRepresentation(new ItemsView([]), 'xml')).toBe(`${DECL}<items ${NS}/>`);
  });
});

describe('renderRepresentation, XML, against an XML library', () => {
  /** The same tree through xmlbuilder2, which rendered these documents before. */
  function libraryXml(element: RestElement): string {
    const fill = (xml: XMLBuilder, from: RestElement): void => {
      for (const [key, value] of Object.entries(from.attributes)) {
        if (value !== null && value !== undefined) {
          xml.att(key, value instanceof Date ? value.toISOString() : String(value));
        }
      }
      if (from.text !== undefined) {
        xml.txt(from.text);
      }
      for (const child of from.children ?? []) {
        fill(xml.ele(child.name), child);
      }
    };
    const doc = create({ version: '1.0', encoding: 'UTF-8' });
    fill(doc.ele('urn:svc:rest:types', element.name), element);
    return doc.end();
  }

  const awkward = ['', 'plain', `a&b<c>d"e'f`, '\t tab\n line\r return', ']]>', 'ü € 😀'];

  it('renders every value the library does, byte for byte', () => {
    for (const value of awkward) {
      const element: RestElement = {
        name: 'jobToken',
        attributes: { jobId: value, n: 3, ok: true, at: T, none: null, gone: undefined },
        children: [
          { name: 'text', attributes: {}, text: value },
          { name: 'empty', attributes: {} },
          { name: 'emptyText', attributes: { k: value }, text: '' },
          {
            name: 'nested',
            attributes: {},
            children: [{ name: 'leaf', attributes: { v: value }, children: [] }],
          },
        ],
      };
      expect(renderRepresentation({ toElement: () => element }, 'xml')).toBe(libraryXml(element));
    }
  });

  it('escapes text that looks like an entity, which the library left as it was', () => {
    // xmlbuilder2 wrote `&amp;` as it stood, so a reader got `&` back: another text.
    const element: RestElement = {
      name: 'error',
      attributes: { message: 'x &amp; y' },
      text: 'R said &lt;NA&gt;',
    };
    expect(renderRepresentation({ toElement: () => element }, 'xml')).toBe(
      `${DECL}<error ${NS} message="x &amp;amp; y">R said &amp;lt;NA&amp;gt;</error>`,
    );
    expect(libraryXml(element)).toContain('R said &lt;NA&gt;');
  });
});

describe('isRestView', () => {
  it('tells a view from the other values handlers return', () => {
    expect(isRestView(new ErrorRepresentation({ status: 400, error: 'x', message: 'y' }))).toBe(
      true,
    );
    expect(isRestView({ element: 'error', value: {} })).toBe(false);
    expect(isRestView('text')).toBe(false);
    expect(isRestView(null)).toBe(false);
    expect(isRestView(undefined)).toBe(false);
  });
});

describe('RestListStreamWriter', () => {
  const formats: RestFormat[] = ['xml', 'mapped-json', 'json'];
  const sizes = [0, 1, 2, 3];

  for (const format of formats) {
    for (const size of sizes) {
      it(`writes what renderRepresentation renders: ${format}, ${size} item(s)`, () => {
        const list = Array.from({ length: size }, (_, i) => new ItemView(i + 1));
        const chunks: string[] = [];
        const writer = new RestListStreamWriter(EMPTY_ITEMS, format, (chunk) => chunks.push(chunk));
        list.forEach((item) => writer.add(item));
        writer.end();
        expect(chunks.join('')).toBe(renderRepresentation(new ItemsView(list), format));
      });
    }
  }

  it('writes nothing before the first item, then streams every item after the first at once', () => {
    const chunks: string[] = [];
    const writer = new RestListStreamWriter(EMPTY_ITEMS, 'mapped-json', (chunk) =>
      chunks.push(chunk),
    );
    expect(chunks).toEqual([]);
    writer.add(new ItemView(1));
    // The first item waits: it is an object if alone, the head of an array otherwise.
    expect(chunks.join('')).toBe('{"items":{"item":');
    writer.add(new ItemView(2));
    expect(chunks.join('')).toContain('item-2');
    writer.add(new ItemView(3));
    expect(chunks.join('')).toContain('item-3');

    const plainChunks: string[] = [];
    const plainWriter = new RestListStreamWriter(EMPTY_ITEMS, 'json', (chunk) =>
      plainChunks.push(chunk),
    );
    plainWriter.add(new ItemView(1));
    // Plain JSON is always an array: the first item is written at once.
    expect(plainChunks.join('')).toMatch(/^\{"items":\[\{"id":"item-1"/);

    const xmlChunks: string[] = [];
    const xmlWriter = new RestListStreamWriter(EMPTY_ITEMS, 'xml', (chunk) =>
      xmlChunks.push(chunk),
    );
    xmlWriter.add(new ItemView(1));
    expect(xmlChunks.join('')).toContain('item-1');
  });

  it('refuses to be used after end', () => {
    const writer = new RestListStreamWriter(EMPTY_ITEMS, 'xml', () => undefined);
    writer.end();
    expect(() => writer.add(new ItemView(1))).toThrow();
    expect(() => writer.end()).toThrow();
  });

  it('refuses a root that is not an empty list of one kind', () => {
    expect(
      () => new RestListStreamWriter(new ItemsView([new ItemView(1)]).toElement(), 'json', () => 0),
    ).toThrow('items is not an empty list of one kind');
    expect(
      () => new RestListStreamWriter({ name: 'items', attributes: {} }, 'json', () => undefined),
    ).toThrow('items is not an empty list of one kind');
  });

  it('refuses an item of another name than the list', () => {
    const writer = new RestListStreamWriter(EMPTY_ITEMS, 'json', () => undefined);
    writer.add(new ItemView(1));
    expect(() =>
      writer.add(new ErrorRepresentation({ status: 400, error: 'x', message: 'y' })),
    ).toThrow('a error in a list of item elements');
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
