import { create, fragment } from 'xmlbuilder2';
import type { XMLBuilder } from 'xmlbuilder2/lib/interfaces';

/**
 * How the REST representations of SPEC §4, §8 and §9 are rendered: in XML (`wsdl/rest-data.xsd`)
 * and in the Jettison "mapped" JSON that RSB's stack emitted. Each feature defines its own views
 * (`RestView`, next to its code); a view is one element tree, and both formats are rendered from
 * it, so they cannot drift apart: attributes become plain keys, a text-only child becomes a
 * string, repeated children become an array only when there are two or more, and an element with
 * nothing in it becomes `""`.
 */

export const REST_TYPES_NAMESPACE = 'urn:svc:rest:types';

export type RestFormat = 'xml' | 'json';

/** An attribute's value; null and undefined leave the attribute out. */
export type RestAttributeValue = string | number | boolean | Date | null | undefined;

/** An element: attributes, then either text or child elements (never both, per the XSD). */
export interface RestElement {
  name: string;
  attributes: Record<string, RestAttributeValue>;
  children?: RestElement[];
  text?: string;
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
  return format === 'xml'
    ? renderXmlDocument(element)
    : JSON.stringify({ [element.name]: toJson(element) });
}

/** A view's JSON without its root element around it (the flat body of SPEC §5.2). */
export function renderUnwrappedJson(view: RestView): string {
  return JSON.stringify(toJson(view.toElement()));
}

/**
 * Writes a list element (its root named `name`, its items all of one element name) item by item,
 * so that a long listing is never held in memory. Its output equals `renderRepresentation` of the
 * same list. Nothing is written until the first `add` or `end`: a caller whose first read fails
 * can still answer with an error status instead of a half-sent 200.
 */
export class RestListStreamWriter {
  private count = 0;
  private itemName: string | null = null;
  /** JSON only: the first item, held until we know whether it stands alone or opens an array. */
  private firstJson: string | null = null;
  private ended = false;
  /** What xmlbuilder2 writes before the `>` or `/>` of the root; the stream tests pin this. */
  private readonly xmlOpen: string;

  constructor(
    private readonly name: string,
    private readonly format: RestFormat,
    private readonly write: (chunk: string) => void,
  ) {
    this.xmlOpen = `${XML_DECLARATION}<${name} xmlns="${REST_TYPES_NAMESPACE}"`;
  }

  add(view: RestView): void {
    if (this.ended) {
      throw new Error('RestListStreamWriter: add() after end()');
    }
    const element = view.toElement();
    // Jettison groups children by name: items of another name would not render as one list.
    if (this.itemName !== null && element.name !== this.itemName) {
      throw new Error(
        `RestListStreamWriter: a ${element.name} in a list of ${this.itemName} elements`,
      );
    }
    this.itemName = element.name;
    if (this.format === 'xml') {
      // Serialised without a namespace: inside the namespaced root it inherits the default one.
      const item = renderXmlFragment(element);
      this.write(this.count === 0 ? `${this.xmlOpen}>${item}` : item);
    } else {
      const item = JSON.stringify(toJson(element));
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

function renderXmlDocument(element: RestElement): string {
  const doc = create({ version: '1.0', encoding: 'UTF-8' });
  appendXml(doc.ele(REST_TYPES_NAMESPACE, element.name), element);
  return doc.end();
}

function renderXmlFragment(element: RestElement): string {
  const frag = fragment();
  appendXml(frag.ele(element.name), element);
  return frag.end();
}

/** Fills `xml` (already created for `element`); children inherit its namespace. */
function appendXml(xml: XMLBuilder, element: RestElement): void {
  for (const [key, value] of Object.entries(element.attributes)) {
    if (value !== null && value !== undefined) {
      xml.att(key, xmlSafe(attributeText(value)));
    }
  }
  if (element.text !== undefined) {
    xml.txt(xmlSafe(element.text));
  }
  for (const child of element.children ?? []) {
    appendXml(xml.ele(child.name), child);
  }
}

function attributeText(value: string | number | boolean | Date): string {
  return value instanceof Date ? value.toISOString() : String(value);
}

/**
 * Characters XML 1.0 cannot carry at all (control characters, lone surrogates) become U+FFFD.
 * R error messages can contain them, and xmlbuilder2 would otherwise emit a document no
 * parser accepts.
 */
function xmlSafe(text: string): string {
  return text.replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, '\uFFFD');
}

// ---- JSON (Jettison "mapped") ----

function toJson(element: RestElement): JsonValue {
  const attributes = Object.entries(element.attributes).filter(
    (entry): entry is [string, string | number | boolean | Date] =>
      entry[1] !== null && entry[1] !== undefined,
  );
  const children = element.children ?? [];
  if (attributes.length === 0 && children.length === 0) {
    return element.text ?? '';
  }
  const object: { [key: string]: JsonValue } = {};
  for (const [key, value] of attributes) {
    object[key] = value instanceof Date ? value.toISOString() : value;
  }
  // Same-named children collapse into one key: a single child is an object, several an array.
  const groups = new Map<string, JsonValue[]>();
  for (const child of children) {
    const group = groups.get(child.name) ?? [];
    group.push(toJson(child));
    groups.set(child.name, group);
  }
  for (const [name, values] of groups) {
    object[name] = values.length === 1 ? values[0] : values;
  }
  return object;
}
