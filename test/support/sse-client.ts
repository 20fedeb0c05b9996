/** Server-Sent Events read from a live response (GET /jobs/{app}/{jobId}/log). */
export interface SseEvent {
  id?: string;
  event: string;
  data: string;
}

/** Reads Server-Sent Events from a streaming response, one at a time. */
export class SseReader {
  private buffer = '';
  private readonly decoder = new TextDecoder();
  constructor(private readonly reader: ReadableStreamDefaultReader<Uint8Array>) {}

  async next(): Promise<SseEvent | null> {
    for (;;) {
      const end = this.buffer.indexOf('\n\n');
      if (end >= 0) {
        const block = this.buffer.slice(0, end);
        this.buffer = this.buffer.slice(end + 2);
        const event: SseEvent = { event: 'message', data: '' };
        for (const line of block.split('\n')) {
          const [field, ...rest] = line.split(': ');
          const value = rest.join(': ');
          if (field === 'id') {
            event.id = value;
          }
          if (field === 'event') {
            event.event = value;
          }
          if (field === 'data') {
            event.data = value;
          }
        }
        return event;
      }
      const { done, value } = await this.reader.read();
      if (done) {
        return null;
      }
      this.buffer += this.decoder.decode(value, { stream: true });
    }
  }
}

export async function follow(
  url: string,
  headers: Record<string, string> = {},
): Promise<SseReader> {
  const response = await fetch(url, { headers: { Accept: 'text/event-stream', ...headers } });
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
  return new SseReader(response.body!.getReader());
}
