/**
 * How the REST representations are rendered (docs/api.md#representations). Each feature defines
 * its own views (`RestView`, next to its code); a view is one element tree, and every format is
 * rendered from it, so they cannot drift apart:
 * - `xml`: `wsdl/rest-data.xsd`;
 * - `mapped-json` (`application/vnd.svc+json`): the Jettison "mapped" JSON that RSB's stack
 *   emitted, the root's name around the body, attributes as keys, a text-only child as a string,
 *   repeated children an array only when there are two or more, an empty element `""`;
 * - `json` (`application/json`): plain JSON, the root's content alone, attributes as keys of
 *   their own types, a text-only child as a string, and every list (`RestElement.lists`) an array
 *   under its own key, even of zero or one items.
 */

import { xmlAttributeValue, xmlText } from './xml-text';

export const REST_TYPES_NAMESPACE = 'urn:svc:rest:types';

export type RestFormat = 'xml' | 'mapped-json' | 'json';

/** An attribute's value; null and undefined leave the attribute out. */
export type RestAttributeValue = string | number | boolean | Date | null | undefined;

/** An element: attributes, then either text or child elements (never both, per the XSD). */
export interface RestElement {
  name: string;
  attributes: Record<string, RestAttributeValue>;
  children?: RestElement[];
  text?: string;
  /**
   * The children that form lists: child element name → the key of their array in plain JSON,
   * which is there (as `[]`) when there are none. Other children are single: their name is
   * their key.
   */
  lists?: Readonly<Record<string, string>>;
}

/** A REST representation, as a controller returns it: its feature says what it looks like. */
export interface RestView {
  /** The representation as one element tree; the root's name is the representation's. */
  toElement(): RestElement;
}

export function isRestView(value: unknown): value is RestView {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Partial<RestView>).toElement === 'function'
  );
}

type JsonValue = string | number | boolean | JsonValue[] | { [key: string]: JsonValue };

export function renderRepresentation(view: RestView, format: RestFormat): string {
  const element = view.toElement();
  switch (format) {
    case 'xml':
      return renderXmlDocument(element);
    case 'mapped-json':
      return JSON.stringify({ [element.name]: toMappedJson(element) });
    case 'json':
      return JSON.stringify(toPlainJson(element));
  }
}

/**
 * Writes a list (`list`: its root element, empty, with one entry in `lists` naming its items) item
 * by item, so that a long listing is never held in memory. Its output equals
 * `renderRepresentation` of the same list. Nothing is written until the first `add` or `end`: a
 * caller whose first read fails can still answer with an error status instead of a half-sent 200.
 */
export class RestListStreamWriter {
  private count = 0;
  private readonly name: string;
  private readonly itemName: string;
  private readonly plainKey: string;
  /** Mapped JSON only: the first item, held until we know whether it stands alone or opens an array. */
  private firstJson: string | null = null;
  private ended = false;
  /** What xmlbuilder2 writes before the `>` or `/>` of the root; the stream tests pin this. */
  private readonly xmlOpen: string;

  constructor(
    list: RestElement,
    private readonly format: RestFormat,
    private readonly write: (chunk: string) => void,
  ) {
    const lists = Object.entries(list.lists ?? {});
    const attributes = Object.values(list.attributes).filter((v) => v !== null && v !== undefined);
    if (lists.length !== 1 || attributes.length > 0 || (list.children ?? []).length > 0) {
      throw new Error(`RestListStreamWriter: ${list.name} is not an empty list of one kind`);
    }
    this.name = list.name;
    [[this.itemName, this.plainKey]] = lists;
    this.xmlOpen = `${XML_DECLARATION}<${list.name} xmlns="${REST_TYPES_NAMESPACE}"`;
  }

  add(view: RestView): void {
    if (this.ended) {
      throw new Error('RestListStreamWriter: add() after end()');
    }
    const element = view.toElement();
    // Items of another name would not be one list (Jettison groups children by name).
    if (element.name !== this.itemName) {
      throw new Error(
        `RestListStreamWriter: a ${element.name} in a list of ${this.itemName} elements`,
      );
    }
    if (this.format === 'xml') {
      // Serialised without a namespace: inside the namespaced root it inherits the default one.
      const item = renderXmlFragment(element);
      this.write(this.count === 0 ? `${this.xmlOpen}>${item}` : item);
    } else if (this.format === 'json') {
      const item = JSON.stringify(toPlainJson(element));
      this.write(this.count === 0 ? `{${JSON.stringify(this.plainKey)}:[${item}` : `,${item}`);
    } else {
      const item = JSON.stringify(toMappedJson(element));
      if (this.count === 0) {
        this.write(`{${JSON.stringify(this.name)}:{${JSON.stringify(element.name)}:`);
        this.firstJson = item;
      } else if (this.count === 1) {
        this.write(`[${this.firstJson ?? ''},${item}`);
        this.firstJson = null;
      } else {
        this.write(`,${item}`);
      }
    }
    this.count++;
  }

  end(): void {
    if (this.ended) {
      throw new Error('RestListStreamWriter: end() called twice');
    }
    this.ended = true;
    if (this.format === 'xml') {
      this.write(this.count === 0 ? `${this.xmlOpen}/>` : `</${this.name}>`);
    } else if (this.format === 'json') {
      this.write(this.count === 0 ? `{${JSON.stringify(this.plainKey)}:[]}` : ']}');
    } else if (this.count === 0) {
      this.write(`{${JSON.stringify(this.name)}:""}`);
    } else if (this.count === 1) {
      this.write(`${this.firstJson ?? ''}}}`);
      this.firstJson = null;
    } else {
      this.write(']}}');
    }
  }
}

const XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>';

// ---- XML ----

/*
 * Written as text, not through an XML builder's tree: the job token and the result's metadata
 * are rendered for every job, and building a DOM for them cost about 0.7 ms of CPU per job. The
 * output is byte for byte what xmlbuilder2 writes for the same tree (rest-representation.spec
 * compares the two) where xmlbuilder2 is right: names are the views' own, and values are
 * escaped by xml-text.ts, every `&` included, where xmlbuilder2 left an entity-like text as it
 * stood.
 */

function renderXmlDocument(element: RestElement): string {
  return XML_DECLARATION + xmlOf(element, ` xmlns="${REST_TYPES_NAMESPACE}"`);
}

function renderXmlFragment(element: RestElement): string {
  return xmlOf(element, '');
}

/** `element` as XML; `namespace`: the root's declaration (children inherit it). */
function xmlOf(element: RestElement, namespace: string): string {
  let xml = `<${element.name}${namespace}`;
  for (const [key, value] of Object.entries(element.attributes)) {
    if (value !== null && value !== undefined) {
      xml += ` ${key}="${xmlAttributeValue(attributeText(value))}"`;
    }
  }
  if (element.text !== undefined) {
    return `${xml}>${xmlText(element.text)}</${element.name}>`;
  }
  const children = element.children ?? [];
  if (children.length === 0) {
    return `${xml}/>`;
  }
  return `${xml}>${children.map((child) => xmlOf(child, '')).join('')}</${element.name}>`;
}

function attributeText(value: string | number | boolean | Date): string {
  return value instanceof Date ? value.toISOString() : String(value);
}

// ---- JSON ----

/** The attributes that are there, as JSON values (dates as ISO text). */
function jsonAttributes(element: RestElement): [string, JsonValue][] {
  const present: [string, JsonValue][] = [];
  for (const [key, value] of Object.entries(element.attributes)) {
    if (value !== null && value !== undefined) {
      present.push([key, value instanceof Date ? value.toISOString() : value]);
    }
  }
  return present;
}

/** Jettison "mapped": the shape RSB's clients read. */
function toMappedJson(element: RestElement): JsonValue {
  const attributes = jsonAttributes(element);
  const children = element.children ?? [];
  if (attributes.length === 0 && children.length === 0) {
    return element.text ?? '';
  }
  const object: { [key: string]: JsonValue } = Object.fromEntries(attributes);
  // Same-named children collapse into one key: a single child is an object, several an array.
  const groups = new Map<string, JsonValue[]>();
  for (const child of children) {
    const group = groups.get(child.name) ?? [];
    group.push(toMappedJson(child));
    groups.set(child.name, group);
  }
  for (const [name, values] of groups) {
    object[name] = values.length === 1 ? values[0] : values;
  }
  return object;
}

/** Plain JSON: a text-only element is its text, any other an object; lists are arrays. */
function toPlainJson(element: RestElement): JsonValue {
  const attributes = jsonAttributes(element);
  const children = element.children ?? [];
  const lists = element.lists ?? {};
  if (element.text !== undefined && attributes.length === 0 && children.length === 0) {
    return element.text;
  }
  const object: { [key: string]: JsonValue } = Object.fromEntries(attributes);
  for (const child of children) {
    const listKey = Object.hasOwn(lists, child.name) ? lists[child.name] : undefined;
    if (listKey === undefined) {
      if (Object.hasOwn(object, child.name)) {
        // A view's bug: a repeated child must be declared a list, or all but one would be lost.
        throw new Error(`${element.name}: repeated ${child.name} is not declared in lists`);
      }
      object[child.name] = toPlainJson(child);
    } else {
      const list = object[listKey];
      if (Array.isArray(list)) {
        list.push(toPlainJson(child));
      } else {
        object[listKey] = [toPlainJson(child)];
      }
    }
  }
  for (const key of Object.values(lists)) {
    object[key] ??= [];
  }
  return object;
}
