import { ImapFlow, type MessageStructureObject } from 'imapflow';
import Pop3Command from 'node-pop3';
import type { EmailAccount } from '../config/mail-settings';

/**
 * A message waiting in a mailbox: its key, stable across sessions and nodes, its size and, where
 * the server tells it before the message is read (IMAP BODYSTRUCTURE), its count of MIME parts.
 */
export interface WaitingMessage {
  key: string;
  size: number;
  /** The nodes of its MIME tree, the message itself included; null: not known before reading. */
  parts: number | null;
}

/** The nodes of a BODYSTRUCTURE tree, counted without recursion (a hostile tree may be deep). */
function partsOf(root: MessageStructureObject | undefined): number | null {
  if (root === undefined) {
    return null;
  }
  let count = 0;
  const open = [root];
  for (let node = open.pop(); node !== undefined; node = open.pop()) {
    count += 1;
    open.push(...(node.childNodes ?? []));
  }
  return count;
}

/**
 * One session with a mailbox: what waits in it, a message's bytes, and its removal. IMAP keys
 * are `UIDVALIDITY:UID` (a UID is never reused while UIDVALIDITY stays), POP3 keys the UIDL.
 */
export interface MailboxSession {
  waiting(): Promise<WaitingMessage[]>;
  read(key: string): Promise<Buffer>;
  /** The message's header only: enough to refuse a message too large to read. */
  readHeader(key: string): Promise<Buffer>;
  remove(key: string): Promise<void>;
  /**
   * A message that is not a job, out of the way of every node: IMAP moves it to `folder` (made
   * when missing); without a folder, and on POP3, it is removed.
   */
  setAside(key: string, folder: string | null): Promise<void>;
  /** Whether the connection still works: a failure of one message is not one of the mailbox. */
  usable(): boolean;
  close(): Promise<void>;
}

/** No mailbox operation waits longer than this for the server. */
const SOCKET_TIMEOUT_MS = 60_000;

class ImapSession implements MailboxSession {
  private uidValidity = '';
  private release: (() => void) | null = null;

  constructor(
    private readonly client: ImapFlow,
    private readonly folder: string,
  ) {}

  async open(): Promise<void> {
    // An emitter's 'error' without a listener ends the process; the failing call rejects anyway.
    this.client.on('error', () => undefined);
    await this.client.connect();
    const lock = await this.client.getMailboxLock(this.folder).catch((error: unknown) => {
      this.client.close();
      throw error;
    });
    this.release = () => lock.release();
    const mailbox = this.client.mailbox;
    this.uidValidity = mailbox === false ? '' : String(mailbox.uidValidity);
  }

  async waiting(): Promise<WaitingMessage[]> {
    const found: WaitingMessage[] = [];
    const mailbox = this.client.mailbox;
    if (mailbox === false || mailbox.exists === 0) {
      return found;
    }
    const query = { uid: true, size: true, flags: true, bodyStructure: true };
    for await (const message of this.client.fetch('1:*', query)) {
      if (!message.flags?.has('\\Deleted')) {
        found.push({
          key: `${this.uidValidity}:${message.uid}`,
          size: message.size ?? 0,
          parts: partsOf(message.bodyStructure),
        });
      }
    }
    return found;
  }

  private uidOf(key: string): string {
    return key.slice(key.indexOf(':') + 1);
  }

  async read(key: string): Promise<Buffer> {
    const message = await this.client.fetchOne(this.uidOf(key), { source: true }, { uid: true });
    if (message === false || message.source === undefined) {
      throw new Error(`message ${key} is gone from the mailbox`);
    }
    return message.source;
  }

  async readHeader(key: string): Promise<Buffer> {
    const message = await this.client.fetchOne(this.uidOf(key), { headers: true }, { uid: true });
    if (message === false || message.headers === undefined) {
      throw new Error(`message ${key} is gone from the mailbox`);
    }
    return message.headers;
  }

  async remove(key: string): Promise<void> {
    // \Deleted and expunged (UID EXPUNGE where the server has it): another node's session sees it gone.
    await this.client.messageDelete(this.uidOf(key), { uid: true });
  }

  async setAside(key: string, folder: string | null): Promise<void> {
    if (folder === null) {
      return this.remove(key);
    }
    // Made on first use; a folder that is there already is no failure.
    await this.client.mailboxCreate(folder).catch(() => undefined);
    // MOVE (or COPY, \Deleted and expunge where the server lacks it): gone from the polled folder.
    if ((await this.client.messageMove(this.uidOf(key), folder, { uid: true })) === false) {
      throw new Error(`message ${key} could not be moved to ${folder}`);
    }
  }

  usable(): boolean {
    return this.client.usable;
  }

  async close(): Promise<void> {
    this.release?.();
    await this.client.logout().catch(() => this.client.close());
  }
}

class Pop3Session implements MailboxSession {
  /** UIDL -> message number in this session. */
  private readonly numbers = new Map<string, number>();
  private broken = false;

  constructor(private readonly client: Pop3Command) {
    // An emitter's 'error' without a listener ends the process; the failing command rejects anyway.
    client.on('error', () => {
      this.broken = true;
    });
  }

  usable(): boolean {
    return !this.broken;
  }

  async waiting(): Promise<WaitingMessage[]> {
    const sizes = new Map<string, number>();
    for (const [number, size] of (await this.client.LIST()) as string[][]) {
      sizes.set(number, Number(size));
    }
    const found: WaitingMessage[] = [];
    for (const [number, uid] of (await this.client.UIDL()) as string[][]) {
      this.numbers.set(uid, Number(number));
      found.push({ key: uid, size: sizes.get(number) ?? 0, parts: null });
    }
    return found;
  }

  private numberOf(key: string): number {
    const number = this.numbers.get(key);
    if (number === undefined) {
      throw new Error(`message ${key} was not listed in this session`);
    }
    return number;
  }

  async read(key: string): Promise<Buffer> {
    // node-pop3 hands the message over as text; MIME keeps attachments in 7-bit encodings.
    return Buffer.from(await this.client.RETR(this.numberOf(key)), 'utf8');
  }

  async readHeader(key: string): Promise<Buffer> {
    return Buffer.from(await this.client.TOP(this.numberOf(key), 0), 'utf8');
  }

  async remove(key: string): Promise<void> {
    await this.client.DELE(this.numberOf(key));
  }

  async setAside(key: string): Promise<void> {
    // POP3 has no folders: recorded in mail_reply, the message is deleted.
    await this.remove(key);
  }

  async close(): Promise<void> {
    // POP3 removes the messages marked with DELE only at QUIT (the UPDATE state).
    await this.client.QUIT();
  }
}

/** Opens a session with the account's mailbox (logged in, the IMAP folder selected). */
export async function openMailbox(account: EmailAccount): Promise<MailboxSession> {
  if (account.protocol === 'imap') {
    const session = new ImapSession(
      new ImapFlow({
        host: account.host,
        port: account.port,
        secure: account.secure,
        auth: { user: account.user, pass: account.password },
        logger: false,
        socketTimeout: SOCKET_TIMEOUT_MS,
      }),
      account.folder,
    );
    await session.open();
    return session;
  }
  const client = new Pop3Command({
    host: account.host,
    port: account.port,
    tls: account.secure,
    user: account.user,
    password: account.password,
    timeout: SOCKET_TIMEOUT_MS,
  });
  return new Pop3Session(client);
}
