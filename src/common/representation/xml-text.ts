/**
 * Values written into XML the service builds as text (REST representations, SOAP envelopes and
 * faults, the audit trail). Every value is data, often R's or a caller's: each `&` is escaped,
 * even one that already looks like an entity, so a reader gets back exactly the text that was
 * written; characters XML 1.0 cannot carry at all (control characters, lone surrogates) become
 * U+FFFD, so the document always parses.
 */

const TEXT_SPECIALS = /[&<>]/g;
const ATTRIBUTE_SPECIALS = /[&<>"]/g;
const ENTITIES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
};
const NOT_XML_CHARACTER = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu;

/** `text` as an element's content. */
export function xmlText(text: string): string {
  return xmlSafe(text).replace(TEXT_SPECIALS, (special) => ENTITIES[special]);
}

/** `text` as an attribute's value between double quotes. */
export function xmlAttributeValue(text: string): string {
  return xmlSafe(text).replace(ATTRIBUTE_SPECIALS, (special) => ENTITIES[special]);
}

function xmlSafe(text: string): string {
  return text.replace(NOT_XML_CHARACTER, '\uFFFD');
}
