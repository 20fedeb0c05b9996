/**
 * Decodes base64Binary text that arrives in pieces (an XML parser's text events) without
 * holding it whole, and rejects what `Buffer.from(text, 'base64')` would silently skip:
 * characters outside the alphabet, misplaced padding, a length that is not a multiple of 4.
 * XML whitespace between characters is allowed, as XML Schema's base64Binary allows it.
 */
export class Base64Decoder {
  /** Characters of an unfinished 4-character group (or the padded last group). */
  private pending = '';
  private padded = false;

  /** The bytes `text` completes; throws a Base64Error on invalid input. */
  write(text: string): Buffer {
    const compact = text.replace(/[\t\n\r ]+/g, '');
    if (compact.length === 0) {
      return EMPTY;
    }
    if (/[^A-Za-z0-9+/=]/.test(compact)) {
      throw new Base64Error('a character outside the base64 alphabet');
    }
    if (this.padded) {
      // Only more padding may follow padding, and at most two in all.
      this.pending += compact;
      this.checkPaddedGroup();
      return EMPTY;
    }
    const combined = this.pending + compact;
    const paddingAt = combined.indexOf('=');
    if (paddingAt === -1) {
      const whole = combined.length - (combined.length % 4);
      this.pending = combined.slice(whole);
      return Buffer.from(combined.slice(0, whole), 'base64');
    }
    const groupStart = paddingAt - (paddingAt % 4);
    this.pending = combined.slice(groupStart);
    this.padded = true;
    this.checkPaddedGroup();
    return Buffer.from(combined.slice(0, groupStart), 'base64');
  }

  /** The last bytes; throws a Base64Error when the text ended inside a group. */
  end(): Buffer {
    const last = this.pending;
    this.pending = '';
    if (last.length === 0) {
      return EMPTY;
    }
    if (last.length !== 4) {
      throw new Base64Error('a length that is not a multiple of 4');
    }
    return Buffer.from(last, 'base64');
  }

  private checkPaddedGroup(): void {
    const group = this.pending;
    const paddingAt = group.indexOf('=');
    if (group.length > 4 || paddingAt < 2 || /[^=]/.test(group.slice(paddingAt))) {
      throw new Base64Error('misplaced padding');
    }
  }
}

export class Base64Error extends Error {
  constructor(problem: string) {
    super(`invalid base64 data: ${problem}`);
    this.name = 'Base64Error';
  }
}

const EMPTY = Buffer.alloc(0);
