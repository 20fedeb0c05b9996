import StreamSearch from 'streamsearch';

/** Headers of one MIME part, keyed by lower-case name. */
export type PartHeaders = ReadonlyMap<string, string>;

/** Where the body of one part goes, chunk by chunk, as it arrives. */
export interface PartSink {
  write(chunk: Buffer): void;
  end(): void;
}

export class MultipartSyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MultipartSyntaxError';
  }
}

/**
 * A boundary as RFC 2046 §5.1.1 allows it: 1 to 70 characters of its `bchars`, not ending
 * in a space. The splitter relies on this: such a boundary cannot contain CR or LF, so a
 * delimiter cannot overlap the data before it.
 */
export function isValidBoundary(boundary: string): boolean {
  return /^[0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?]$/.test(boundary);
}

const MAX_HEADER_BYTES = 16 * 1024;
const CRLF = Buffer.from('\r\n');
const HEADER_END = Buffer.from('\r\n\r\n');

type SplitterState = 'preamble' | 'partHeader' | 'body' | 'epilogue';

/**
 * Splits a multipart body (RFC 2046; used here for multipart/related, RFC 2387) into parts
 * as the bytes arrive, handing each part's body to a sink in pieces: no part is held whole.
 * No library fits: busboy and @fastify/busboy accept only multipart/form-data (parts without
 * a form-data Content-Disposition are skipped), @remix-run/multipart-parser collects each
 * part in memory before yielding it, and dicer is unmaintained. The delimiter search is
 * streamsearch's (the Boyer-Moore-Horspool search busboy uses); only the framing is ours.
 */
export class MultipartSplitter {
  private readonly search: StreamSearch;
  private state: SplitterState = 'preamble';
  /** Bytes after a delimiter, up to the end of the part's header block. */
  private header: Buffer[] = [];
  private headerBytes = 0;
  private sink: PartSink | undefined;
  private failure: Error | undefined;

  /** `onPart` is called with each part's headers and returns the sink for its body. */
  constructor(
    boundary: string,
    private readonly onPart: (headers: PartHeaders) => PartSink,
  ) {
    if (!isValidBoundary(boundary)) {
      throw new MultipartSyntaxError('the multipart boundary is not a valid RFC 2046 boundary');
    }
    this.search = new StreamSearch(`\r\n--${boundary}`, (isMatch, data, start, end, isSafeData) =>
      this.onSearch(isMatch, data, start, end, isSafeData === true),
    );
    // The first delimiter may open the body without a CRLF before it.
    this.search.push(CRLF);
  }

  /** Feeds the next bytes of the body; sinks are called synchronously. */
  write(chunk: Buffer): void {
    this.throwIfFailed();
    this.search.push(chunk);
    this.throwIfFailed();
  }

  /** Declares the body complete; throws if it ended before the close delimiter. */
  end(): void {
    this.throwIfFailed();
    this.search.destroy();
    this.throwIfFailed();
    switch (this.state) {
      case 'epilogue':
        return;
      case 'preamble':
        throw new MultipartSyntaxError('the multipart body holds no boundary delimiter');
      case 'partHeader':
      case 'body':
        throw new MultipartSyntaxError('the multipart body ends inside a part (truncated)');
    }
  }

  private throwIfFailed(): void {
    if (this.failure) {
      throw this.failure;
    }
  }

  private onSearch(
    isMatch: boolean,
    data: Buffer | undefined,
    start: number,
    end: number,
    isSafeData: boolean,
  ): void {
    if (this.failure) {
      return;
    }
    try {
      if (data && end > start) {
        const bytes = data.subarray(start, end);
        // Unsafe data is streamsearch's look-behind buffer, which it reuses.
        this.onBytes(isSafeData ? bytes : Buffer.from(bytes));
      }
      if (isMatch) {
        this.onDelimiter();
      }
    } catch (error) {
      this.failure = error instanceof Error ? error : new Error(String(error));
    }
  }

  private onBytes(bytes: Buffer): void {
    switch (this.state) {
      case 'preamble':
      case 'epilogue':
        return;
      case 'body':
        this.sink?.write(bytes);
        return;
      case 'partHeader':
        this.header.push(bytes);
        this.headerBytes += bytes.length;
        this.tryParseHeader();
        return;
    }
  }

  private onDelimiter(): void {
    switch (this.state) {
      case 'epilogue':
        return;
      case 'partHeader':
        if (this.headerBytes > 0 || this.sink) {
          throw new MultipartSyntaxError('a multipart delimiter interrupts the part headers');
        }
        throw new MultipartSyntaxError('two multipart delimiters follow each other');
      case 'body':
        this.sink?.end();
        this.sink = undefined;
        break;
      case 'preamble':
        break;
    }
    this.state = 'partHeader';
    this.header = [];
    this.headerBytes = 0;
  }

  /** Reads the rest of the delimiter line and the header block once they are complete. */
  private tryParseHeader(): void {
    const buffered = this.header.length === 1 ? this.header[0] : Buffer.concat(this.header);
    this.header = [buffered];
    if (buffered.length >= 2 && buffered[0] === 0x2d && buffered[1] === 0x2d) {
      this.state = 'epilogue';
      return;
    }
    const lineEnd = buffered.indexOf(CRLF);
    if (lineEnd === -1) {
      this.checkHeaderSize(buffered.length);
      return;
    }
    if (!/^[ \t]*$/.test(buffered.toString('latin1', 0, lineEnd))) {
      throw new MultipartSyntaxError('a multipart delimiter line holds more than the boundary');
    }
    // The delimiter line's CRLF also opens an empty header block.
    const headerEnd = buffered.indexOf(HEADER_END, lineEnd);
    if (headerEnd === -1) {
      this.checkHeaderSize(buffered.length);
      return;
    }
    this.checkHeaderSize(headerEnd);
    const headers = parseHeaders(buffered.toString('utf8', lineEnd + 2, headerEnd));
    this.header = [];
    this.headerBytes = 0;
    this.state = 'body';
    this.sink = this.onPart(headers);
    const rest = buffered.subarray(headerEnd + HEADER_END.length);
    if (rest.length > 0) {
      this.sink.write(rest);
    }
  }

  private checkHeaderSize(bytes: number): void {
    if (bytes > MAX_HEADER_BYTES) {
      throw new MultipartSyntaxError(`a multipart part header exceeds ${MAX_HEADER_BYTES} bytes`);
    }
  }
}

/** RFC 5322 header fields, folded lines unfolded; a repeated field keeps its first value. */
function parseHeaders(block: string): PartHeaders {
  const headers = new Map<string, string>();
  if (block.length === 0) {
    return headers;
  }
  for (const line of block.replace(/\r\n[ \t]/g, ' ').split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon <= 0) {
      throw new MultipartSyntaxError('a multipart part header line has no field name');
    }
    const name = line.slice(0, colon).trim().toLowerCase();
    if (!headers.has(name)) {
      headers.set(name, line.slice(colon + 1).trim());
    }
  }
  return headers;
}
