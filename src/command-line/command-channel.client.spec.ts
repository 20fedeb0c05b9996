import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CommandFailed } from './cli-command';
import { askService } from './command-channel.client';
import { parseCommandAnswer, parseCommandRequest } from './command-channel';

describe('the command socket: what the command line takes from the service', () => {
  let dir: string;
  let path: string;
  let server: Server | null;

  /** A service on `path` that reads the request's line and then does `reply` with the socket. */
  const serve = async (reply: (socket: Socket, request: string) => void): Promise<void> => {
    server = createServer({ allowHalfOpen: true }, (socket) => {
      let text = '';
      socket.on('data', (chunk: Buffer) => {
        text += chunk.toString();
        if (text.endsWith('\n')) {
          reply(socket, text);
        }
      });
    });
    await new Promise<void>((resolve) => server!.listen(path, resolve));
  };
  const request = { command: 'keys', args: ['list'], input: null };

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-command-socket-'));
    path = join(dir, 'svc.command');
    server = null;
  });
  afterEach(async () => {
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    rmSync(dir, { recursive: true, force: true });
  });

  it('sends one line of JSON and reads the answer', async () => {
    let sent = '';
    await serve((socket, line) => {
      sent = line;
      socket.end('{"stdout":"ID\\n","stderr":"","status":0}\n');
    });
    expect(await askService(path, request)).toEqual({ stdout: 'ID\n', stderr: '', status: 0 });
    expect(parseCommandRequest(sent.trimEnd())).toEqual(request);
  });

  it('is null where nothing listens: the command then acts on the database itself', async () => {
    expect(await askService(path, request)).toBeNull();
  });

  it.each([
    ['closed without an answer', (socket: Socket) => socket.end(), 'ended the connection'],
    ['an answer that is not JSON', (socket: Socket) => socket.end('<html>\n'), 'is not JSON'],
    [
      'an answer of another shape',
      (socket: Socket) => socket.end('{"stdout":"","stderr":"","status":999}\n'),
      'is not one of a command',
    ],
  ])('refuses %s, in one line', async (_, reply, words) => {
    await serve(reply);
    const asked = askService(path, request);
    await expect(asked).rejects.toThrow(CommandFailed);
    await expect(asked).rejects.toThrow(words);
  });

  it('stops reading an answer over 16 MiB', async () => {
    await serve((socket) => {
      const piece = Buffer.alloc(1024 * 1024, 'x');
      // The command line cuts the connection: the writes after it fail.
      socket.on('error', () => undefined);
      const more = (): void => {
        while (!socket.destroyed && socket.write(piece)) {
          // until the socket's buffer is full
        }
      };
      socket.on('drain', more);
      more();
    });
    await expect(askService(path, request)).rejects.toThrow(/answered more than 16777216 bytes/);
  });

  it('takes a refusal as it was sent, and nothing else as a status', () => {
    expect(
      parseCommandAnswer('{"stdout":"","stderr":"","refused":"usage","message":"too many"}'),
    ).toEqual({ stdout: '', stderr: '', refused: 'usage', message: 'too many' });
    expect(() =>
      parseCommandAnswer('{"stdout":"","stderr":"","refused":"root","message":"x"}'),
    ).toThrow('is not one of a command');
    expect(() => parseCommandRequest('{"command":"keys","args":[1],"input":null}')).toThrow(
      'the request is not',
    );
  });
});
