/**
 * What R cannot hold of a client's text. An R string ends at its first NUL, and R's UTF-8
 * strings cannot carry a UTF-16 surrogate that has no partner: handed to R, the first is cut
 * (native R) or refused with R's own error (webR), the second becomes bytes that are no text.
 * So every door where a client's string reaches R refuses such a value with a 400 that names
 * where it was, never passing on a shortened one.
 */

// eslint-disable-next-line no-control-regex
const NUL = /\u0000/;
const UNPAIRED_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Why R cannot hold `text` as a string, or null when it can. */
export function rStringProblem(text: string): string | null {
  if (NUL.test(text)) {
    return 'holds a NUL character, which an R string cannot hold';
  }
  const surrogate = UNPAIRED_SURROGATE.exec(text);
  if (surrogate) {
    const code = surrogate[0].charCodeAt(0).toString(16);
    return `holds an unpaired surrogate (\\u${code}), which is not Unicode text`;
  }
  return null;
}
