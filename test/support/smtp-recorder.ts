import { AddressInfo } from 'node:net';
import { ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';

/** A message the recorder accepted: its envelope and the parsed message. */
export interface ReceivedMail {
  envelopeTo: string[];
  mail: ParsedMail;
}

export interface SmtpRecorder {
  port: number;
  received: ReceivedMail[];
  /** While true, every message is refused with a temporary error (451). */
  refusing: boolean;
  /** Messages refused so far. */
  refusals: number;
  /** Recipients refused for good (550), whatever `refusing` says. */
  refusedRecipients: Set<string>;
  stop(): Promise<void>;
}

/** An SMTP server on a free port of 127.0.0.1 that keeps what it receives (no TLS, no auth). */
export async function startSmtpRecorder(): Promise<SmtpRecorder> {
  const recorder: SmtpRecorder = {
    port: 0,
    received: [],
    refusing: false,
    refusals: 0,
    refusedRecipients: new Set(),
    stop: () => Promise.resolve(),
  };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onMailFrom(_address, _session, callback) {
      if (recorder.refusing) {
        recorder.refusals += 1;
        const refusal = new Error('mail system busy, try again later') as Error & {
          responseCode: number;
        };
        refusal.responseCode = 451;
        callback(refusal);
        return;
      }
      callback();
    },
    onRcptTo(address, _session, callback) {
      if (recorder.refusedRecipients.has(address.address)) {
        recorder.refusals += 1;
        const refusal = new Error('no such user here') as Error & { responseCode: number };
        refusal.responseCode = 550;
        callback(refusal);
        return;
      }
      callback();
    },
    onData(stream, session, callback) {
      simpleParser(stream)
        .then((mail) => {
          recorder.received.push({
            envelopeTo: session.envelope.rcptTo.map((r) => r.address),
            mail,
          });
          callback();
        })
        .catch((error: Error) => callback(error));
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  recorder.port = (server.server.address() as AddressInfo).port;
  recorder.stop = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return recorder;
}
