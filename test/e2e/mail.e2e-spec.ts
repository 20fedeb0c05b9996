import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ImapFlow } from 'imapflow';
import MailComposer from 'nodemailer/lib/mail-composer';
import type Mail from 'nodemailer/lib/mailer';
import { DataSource } from 'typeorm';
import { startService, RunningService } from '../../src/bootstrap';
import { CatalogService } from '../../src/catalog/catalog.service';
import { PinoLoggerService } from '../../src/common/pino-logger';
import { loadConfig } from '../../src/config/app-config';
import { JobsService } from '../../src/jobs/jobs.service';
import { JobSource } from '../../src/queue/queue.types';
import { MailReplyRepository } from '../../src/mail-replies/mail-reply.repository';
import { MailReplyService } from '../../src/mail-replies/mail-reply.service';
import { Dovecot, startDovecot } from '../support/dovecot';
import { ReceivedMail, SmtpRecorder, startSmtpRecorder } from '../support/smtp-recorder';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  startTestService,
  testEnvironment,
  TestService,
  waitFor,
} from '../support/test-service';
import { makeZip, makeZipBomb } from '../support/zip-fixtures';
import { ADMIN_ENV, retryAsAdmin } from '../support/admin-auth';

const APP = 'mailer';
const REPLY_FROM = 'jobs@svc.example.com';
const ADMIN = 'ops@svc.example.com';
const REFUSED_FOLDER = 'Refused';
/** The authserv-id of the operator's own mail server, as its Authentication-Results name it. */
const AUTHSERV_ID = 'mx.svc.example.com';
const SUM_SCRIPT =
  'd <- read.csv("data.csv")\n' +
  'writeLines(paste("sum", sum(d$x)), "out.txt")\n' +
  'writeLines(grep("^email(Subject|From|Cc)", readLines("configuration.txt"), value = TRUE), "meta.txt")\n';
const DATA = 'x\n1\n2\n3\n';
const TEMPLATE =
  'Hello,\n\n{{outcome}}\n\n-- {{application}}, job {{jobId}} ({{subject}}) {{constructor}}\n';

/** A MIME message as a mail program writes it. */
async function compose(options: Mail.Options): Promise<Buffer> {
  return new MailComposer({ from: 'analyst@example.com', ...options }).compile().build();
}

function imapClient(dovecot: Dovecot, user: string): ImapFlow {
  return new ImapFlow({
    host: '127.0.0.1',
    port: dovecot.imapPort,
    secure: false,
    auth: { user, pass: `${user}-secret` },
    logger: false,
  });
}

/** Puts a message into a user's INBOX (IMAP APPEND); returns its key as the service sees it. */
async function deliver(dovecot: Dovecot, user: string, message: Buffer): Promise<string> {
  const client = imapClient(dovecot, user);
  await client.connect();
  try {
    const appended = await client.append('INBOX', message);
    if (appended === false) {
      throw new Error('APPEND failed');
    }
    return `${appended.uidValidity}:${appended.uid}`;
  } finally {
    await client.logout();
  }
}

/** Messages still in a user's INBOX (or another folder); -1: no such folder. */
async function messagesIn(dovecot: Dovecot, user: string, folder = 'INBOX'): Promise<number> {
  const client = imapClient(dovecot, user);
  await client.connect();
  try {
    const status = await client.status(folder, { messages: true }).catch(() => false as const);
    return status === false ? -1 : (status.messages ?? 0);
  } finally {
    await client.logout();
  }
}

/** The next UID the INBOX will give, as the service's key would name it. */
async function nextKey(dovecot: Dovecot, user: string): Promise<string> {
  const client = imapClient(dovecot, user);
  await client.connect();
  try {
    const status = await client.status('INBOX', { uidNext: true, uidValidity: true });
    if (status === false) {
      throw new Error('STATUS failed');
    }
    return `${String(status.uidValidity)}:${status.uidNext}`;
  } finally {
    await client.logout();
  }
}

/** Subjects of the messages in a user's folder. */
async function subjectsIn(dovecot: Dovecot, user: string, folder: string): Promise<string[]> {
  const client = imapClient(dovecot, user);
  await client.connect();
  try {
    const lock = await client.getMailboxLock(folder);
    try {
      const subjects: string[] = [];
      const mailbox = client.mailbox;
      if (mailbox !== false && mailbox.exists > 0) {
        for await (const message of client.fetch('1:*', { envelope: true })) {
          subjects.push(message.envelope?.subject ?? '');
        }
      }
      return subjects;
    } finally {
      lock.release();
    }
  } finally {
    await client.logout();
  }
}

/** A message of `count` tiny attachments, each a MIME part of its own: the parser's nightmare. */
function manyAttachments(subject: string, count: number): Buffer {
  const lines = [
    'From: analyst@example.com',
    'To: jobs@svc.example.com',
    `Subject: ${subject}`,
    'MIME-Version: 1.0',
    'Content-Type: multipart/mixed; boundary="b"',
    '',
  ];
  for (let i = 0; i < count; i++) {
    lines.push('--b', `Content-Disposition: attachment; filename=${i}.csv`, '', 'x');
  }
  lines.push('--b--', '');
  return Buffer.from(lines.join('\r\n'));
}

function replyAbout(smtp: SmtpRecorder, subject: string): Promise<ReceivedMail> {
  return waitFor(
    () => Promise.resolve(smtp.received.find((r) => r.mail.subject === `RE: ${subject}`)),
    120_000,
    `the reply to "${subject}"`,
  );
}

function attachmentText(reply: ReceivedMail, name: string): string | undefined {
  return reply.mail.attachments.find((a) => a.filename === name)?.content.toString('utf8');
}

describe('jobs by e-mail', () => {
  let dovecot: Dovecot;
  let smtp: SmtpRecorder;
  let service: TestService;
  let configDir: string;
  let query: <T>(sql: string, params?: unknown[]) => Promise<T[]>;

  function accounts(): Array<Record<string, unknown>> {
    return [
      {
        name: 'imap-box',
        mailbox: `imap://jobs@127.0.0.1:${dovecot.imapPort}/INBOX`,
        passwordEnv: 'TEST_MAIL_PASSWORD',
        application: APP,
        pollSeconds: 1,
        replyFrom: REPLY_FROM,
        jobConfiguration: 'defaults.properties',
        replyTemplate: 'reply.txt',
        allowedSenders: ['@example.com'],
        attachMaxBytes: 100_000,
        maxParts: 50,
        maxReplyRecipients: 3,
        failedFolder: REFUSED_FOLDER,
      },
      {
        name: 'pop-box',
        mailbox: `pop3://popper@127.0.0.1:${dovecot.pop3Port}`,
        passwordFile: join(configDir, 'pop-password'),
        application: APP,
        pollSeconds: 1,
        replyFrom: REPLY_FROM,
      },
      {
        name: 'guarded-box',
        mailbox: `imap://guarded@127.0.0.1:${dovecot.imapPort}`,
        passwordEnv: 'TEST_GUARDED_PASSWORD',
        application: APP,
        pollSeconds: 1,
        replyFrom: REPLY_FROM,
        allowedSenders: ['@example.com'],
        requireAuthenticationResults: AUTHSERV_ID,
      },
    ];
  }

  beforeAll(async () => {
    dovecot = await startDovecot(['jobs', 'popper', 'shared', 'guarded']);
    smtp = await startSmtpRecorder();
    configDir = mkdtempSync(join(tmpdir(), 'svc-mail-'));
    writeFileSync(join(configDir, 'pop-password'), 'popper-secret\n');
    service = await startTestService({
      EMAIL_ACCOUNTS: JSON.stringify(accounts()),
      TEST_MAIL_PASSWORD: 'jobs-secret',
      TEST_GUARDED_PASSWORD: 'guarded-secret',
      SMTP_URL: `smtp://127.0.0.1:${smtp.port}`,
      ADMIN_EMAIL: ADMIN,
      PUBLIC_BASE_URL: 'https://svc.example.com',
      POLL_INTERVAL_MS: '200',
      CALLBACK_FIRST_RETRY_MS: '200',
      CALLBACK_MAX_RETRY_DELAY_SECONDS: '1',
      CALLBACK_RETRY_SECONDS: '5',
      ZIP_MAX_COMPRESSION_RATIO: '100',
      MAX_REQUEST_BYTES: '200000',
      ...ADMIN_ENV,
    });
    const catalog = service.app.get(CatalogService);
    await catalog.putFile(
      APP,
      'JOB_CONFIGURATIONS',
      'defaults.properties',
      Buffer.from('team=analytics\n'),
    );
    await catalog.putFile(APP, 'EMAIL_REPLIES', 'reply.txt', Buffer.from(TEMPLATE));
    const dataSource = service.app.get(DataSource);
    query = <T>(sql: string, params: unknown[] = []) => dataSource.query<T[]>(sql, params);
  });

  afterAll(async () => {
    await service?.stop();
    await smtp?.stop();
    await dovecot?.stop();
    rmSync(configDir, { recursive: true, force: true });
  });

  it('runs a script and a data file and replies with the result files, to Reply-To and Cc', async () => {
    await deliver(
      dovecot,
      'jobs',
      await compose({
        subject: 'Sum please',
        replyTo: 'desk@example.com',
        cc: 'boss@example.com',
        text: 'Please add these up.',
        attachments: [
          { filename: 'sum.R', content: SUM_SCRIPT },
          { filename: 'data.csv', content: DATA },
        ],
      }),
    );
    const reply = await replyAbout(smtp, 'Sum please');
    expect(reply.mail.from?.value[0].address).toBe(REPLY_FROM);
    expect(reply.mail.to && 'value' in reply.mail.to && reply.mail.to.value[0].address).toBe(
      'desk@example.com',
    );
    expect(reply.mail.cc && 'value' in reply.mail.cc && reply.mail.cc.value[0].address).toBe(
      'boss@example.com',
    );
    expect(reply.envelopeTo.sort()).toEqual(['boss@example.com', 'desk@example.com']);
    expect(attachmentText(reply, 'out.txt')).toBe('sum 6\n');
    expect(reply.mail.text).toMatch(
      /^Hello,\n\nJob [0-9a-f-]{36} of application mailer is done\.\nIts result files are attached\.\n\n-- mailer, job [0-9a-f-]{36} \(RE: Sum please\) \{\{constructor\}\}\n$/,
    );
    expect(attachmentText(reply, 'meta.txt')).toBe(
      'emailCc = boss@example.com\nemailFrom = analyst@example.com\nemailSubject = Sum please\n',
    );
    await waitFor(async () => (await messagesIn(dovecot, 'jobs')) === 0, 30_000, 'removal');
    const jobs = await query<{ source: string; meta: Record<string, string> }>(
      `SELECT source, meta FROM job WHERE meta->>'emailSubject' = 'Sum please'`,
    );
    expect(jobs).toHaveLength(1);
    expect(jobs[0].source).toBe(JobSource.EMAIL);
    expect(jobs[0].meta).toMatchObject({
      team: 'analytics',
      emailReplyTo: 'desk@example.com',
      emailBody: 'Please add these up.',
    });
  });

  it('unpacks a ZIP attachment under the REST rules', async () => {
    const zip = await makeZip([
      { name: 'sum.R', content: SUM_SCRIPT },
      { name: 'data.csv', content: 'x\n10\n20\n' },
    ]);
    await deliver(
      dovecot,
      'jobs',
      await compose({
        subject: 'Zipped',
        text: 'see zip',
        attachments: [{ filename: 'job.zip', content: zip }],
      }),
    );
    const reply = await replyAbout(smtp, 'Zipped');
    expect(reply.mail.to && 'value' in reply.mail.to && reply.mail.to.value[0].address).toBe(
      'analyst@example.com',
    );
    expect(attachmentText(reply, 'out.txt')).toBe('sum 30\n');
  });

  it('runs a catalog script named by a configuration.txt attachment', async () => {
    await service.app
      .get(CatalogService)
      .putFile(
        APP,
        'R_SCRIPTS',
        'count.R',
        Buffer.from('writeLines(as.character(nrow(read.csv("data.csv"))), "rows.txt")\n'),
      );
    await deliver(
      dovecot,
      'jobs',
      await compose({
        subject: 'From the catalog',
        text: 'count rows',
        attachments: [
          { filename: 'configuration.txt', content: 'rScript=count.R\n' },
          { filename: 'data.csv', content: DATA },
        ],
      }),
    );
    const reply = await replyAbout(smtp, 'From the catalog');
    expect(attachmentText(reply, 'rows.txt')).toBe('3\n');
  });

  it('links a result larger than the account allows to attach', async () => {
    await deliver(
      dovecot,
      'jobs',
      await compose({
        subject: 'Big',
        text: 'big',
        attachments: [
          {
            filename: 'big.R',
            content: 'set.seed(1); writeLines(format(runif(40000)), "big.txt")\n',
          },
        ],
      }),
    );
    const reply = await replyAbout(smtp, 'Big');
    expect(reply.mail.attachments).toEqual([]);
    expect(reply.mail.text).toMatch(
      /https:\/\/svc\.example\.com\/svc\/api\/rest\/result\/mailer\/[0-9a-f-]{36}\.zip/,
    );
  });

  it('answers a failing script with its error text and no attachment', async () => {
    await deliver(
      dovecot,
      'jobs',
      await compose({
        subject: 'Broken',
        text: 'oops',
        attachments: [{ filename: 'broken.R', content: 'stop("no data here")\n' }],
      }),
    );
    const reply = await replyAbout(smtp, 'Broken');
    expect(reply.mail.attachments).toEqual([]);
    expect(reply.mail.text).toMatch(/failed/);
    expect(reply.mail.text).toContain('no data here');
  });

  it("replies again with the outcome of a failed job's retry", async () => {
    const subject = 'Broken, then retried';
    await deliver(
      dovecot,
      'jobs',
      await compose({
        subject,
        text: 'oops',
        attachments: [{ filename: 'retried.R', content: 'stop("still no data")\n' }],
      }),
    );
    expect((await replyAbout(smtp, subject)).mail.text).toContain('still no data');
    // A failed job keeps its input files: that is how it is found here, and how it runs again.
    const [{ job_id: jobId }] = await query<{ job_id: string }>(
      "SELECT job_id FROM job_file WHERE name = 'retried.R'",
    );
    expect((await retryAsAdmin(service.url, APP, jobId)).status).toBe(202);
    const replies = await waitFor(
      () => {
        const about = smtp.received.filter((r) => r.mail.subject === `RE: ${subject}`);
        return Promise.resolve(about.length >= 2 ? about : undefined);
      },
      120_000,
      'the reply to the retry',
    );
    expect(replies).toHaveLength(2);
    expect(replies[1].mail.text).toContain('still no data');
    expect(replies[1].envelopeTo).toEqual(replies[0].envelopeTo);
  });

  describe('answers a message that is not a job with the reason', () => {
    it.each([
      ['not multipart', { text: 'just text' }, /not multipart/],
      ['no attachment', { text: 'text', html: '<p>text</p>' }, /no attachment/],
      [
        'two R scripts',
        {
          text: 'two',
          attachments: [
            { filename: 'a.R', content: '1\n' },
            { filename: 'b.R', content: '2\n' },
          ],
        },
        /at most one R script/,
      ],
    ])('%s', async (label, options, reason) => {
      const subject = `Invalid: ${label}`;
      await deliver(dovecot, 'jobs', await compose({ subject, ...options }));
      const reply = await replyAbout(smtp, subject);
      expect(reply.mail.text).toMatch(reason);
      expect(reply.mail.attachments).toEqual([]);
    });

    it('a message over MAX_REQUEST_BYTES, never read whole', async () => {
      const data = Buffer.alloc(300_000, 'x');
      await deliver(
        dovecot,
        'jobs',
        await compose({
          subject: 'Invalid: huge',
          text: 'h',
          attachments: [{ filename: 'huge.csv', content: data }],
        }),
      );
      const reply = await replyAbout(smtp, 'Invalid: huge');
      expect(reply.mail.text).toMatch(
        /The message has \d+ bytes, more than the limit of 200000 \(MAX_REQUEST_BYTES\)\./,
      );
    });

    it('a ZIP bomb', async () => {
      const bomb = await makeZipBomb(5_000_000);
      await deliver(
        dovecot,
        'jobs',
        await compose({
          subject: 'Invalid: bomb',
          text: 'b',
          attachments: [{ filename: 'job.zip', content: bomb }],
        }),
      );
      const reply = await replyAbout(smtp, 'Invalid: bomb');
      expect(reply.mail.text).toMatch(
        /in the attachment "job\.zip": ZIP entry "bomb\.csv" expands more than 100 times/,
      );
      const jobs = await query(`SELECT 1 FROM job WHERE meta->>'emailSubject' = 'Invalid: bomb'`);
      expect(jobs).toEqual([]);
    });
  });

  it('takes mail from a POP3 mailbox too', async () => {
    await deliver(
      dovecot,
      'popper',
      await compose({
        subject: 'By POP3',
        text: 'pop',
        attachments: [
          { filename: 'sum.R', content: SUM_SCRIPT },
          { filename: 'data.csv', content: DATA },
        ],
      }),
    );
    const reply = await replyAbout(smtp, 'By POP3');
    expect(attachmentText(reply, 'out.txt')).toBe('sum 6\n');
    await deliver(dovecot, 'popper', await compose({ subject: 'POP3 plain', text: 'no parts' }));
    expect((await replyAbout(smtp, 'POP3 plain')).mail.text).toMatch(/not multipart/);
    await waitFor(async () => (await messagesIn(dovecot, 'popper')) === 0, 30_000, 'POP3 removal');
  });

  it('makes no second job for a message whose job was queued by a node that died before removing it', async () => {
    const key = await nextKey(dovecot, 'jobs');
    const message = await compose({
      subject: 'Survivor',
      text: 'x',
      attachments: [
        { filename: 'sum.R', content: SUM_SCRIPT },
        { filename: 'data.csv', content: DATA },
      ],
    });
    // What the dead node did: the record, the job under its id, the reply owed; the message stays.
    const records = service.app.get(MailReplyRepository);
    const { jobId } = await records.record(
      'imap-box',
      key,
      APP,
      '00000000-0000-4000-8000-00000000d1ed',
      REPLY_FROM,
    );
    await service.app.get(JobsService).submit({
      caller: { kind: 'service' },
      applicationName: APP,
      source: JobSource.EMAIL,
      meta: { emailSubject: 'Survivor' },
      callback: null,
      parts: [
        { name: 'sum.R', label: null, content: Buffer.from(SUM_SCRIPT), zip: false },
        { name: 'data.csv', label: null, content: Buffer.from(DATA), zip: false },
      ],
      jobId,
    });
    await records.settle(
      'imap-box',
      key,
      {
        replyTo: 'analyst@example.com',
        cc: null,
        subject: 'RE: Survivor',
        from: REPLY_FROM,
        inReplyTo: null,
        attachMaxBytes: 100_000,
      },
      null,
    );
    expect(await deliver(dovecot, 'jobs', message)).toBe(key);

    await waitFor(async () => (await messagesIn(dovecot, 'jobs')) === 0, 30_000, 'removal');
    const reply = await replyAbout(smtp, 'Survivor');
    expect(attachmentText(reply, 'out.txt')).toBe('sum 6\n');
    const jobs = await query<{ id: string }>(
      `SELECT id FROM job WHERE meta->>'emailSubject' = 'Survivor'`,
    );
    expect(jobs).toEqual([{ id: jobId }]);
    expect(smtp.received.filter((r) => r.mail.subject === 'RE: Survivor')).toHaveLength(1);
  });

  it('delivers a reply later when the SMTP server refuses it for a while', async () => {
    smtp.refusing = true;
    const refusedBefore = smtp.refusals;
    await deliver(
      dovecot,
      'jobs',
      await compose({ subject: 'Patience', text: 'no attachment here' }),
    );
    await waitFor(
      () => Promise.resolve(smtp.refusals >= refusedBefore + 2),
      60_000,
      'two refusals',
    );
    const [pending] = await query<{ state: string; attempts: number; last_error: string }>(
      `SELECT state, attempts, last_error FROM mail_reply WHERE reply_subject = 'RE: Patience'`,
    );
    expect(pending.state).toBe('pending');
    expect(pending.attempts).toBeGreaterThanOrEqual(1);
    expect(pending.last_error).toMatch(/451/);
    smtp.refusing = false;
    const reply = await replyAbout(smtp, 'Patience');
    expect(reply.mail.text).toMatch(/not multipart/);
  });

  it('tells ADMIN_EMAIL when a reply is given up after its retries', async () => {
    smtp.refusedRecipients.add('gone@example.com');
    await deliver(
      dovecot,
      'jobs',
      await compose({ subject: 'Nobody home', replyTo: 'gone@example.com', text: 'plain' }),
    );
    const notice = await waitFor(
      () =>
        Promise.resolve(
          smtp.received.find(
            (r) => r.envelopeTo.includes(ADMIN) && /Nobody home/.test(r.mail.text ?? ''),
          ),
        ),
      60_000,
      'the notice to ADMIN_EMAIL',
    );
    expect(notice.mail.text).toMatch(/could not be sent after \d+ attempt\(s\)/);
    expect(notice.mail.text).toMatch(/no such user here/);
    const [row] = await query<{ state: string }>(
      `SELECT state FROM mail_reply WHERE reply_subject = 'RE: Nobody home'`,
    );
    expect(row.state).toBe('failed');
  });

  it("sends a job result to any address at another module's request (MailReplyService.sendResult)", async () => {
    const job = await service.app.get(JobsService).submit({
      caller: { kind: 'service' },
      applicationName: APP,
      source: 'rest',
      meta: {},
      callback: null,
      parts: [
        { name: 'sum.R', label: null, content: Buffer.from(SUM_SCRIPT), zip: false },
        { name: 'data.csv', label: null, content: Buffer.from(DATA), zip: false },
      ],
    });
    await service.app.get(MailReplyService).sendResult(job.jobId, APP, {
      to: 'morning@example.com',
      subject: 'RE: Morning report',
      from: REPLY_FROM,
    });
    const reply = await replyAbout(smtp, 'Morning report');
    expect(reply.envelopeTo).toEqual(['morning@example.com']);
    expect(attachmentText(reply, 'out.txt')).toBe('sum 6\n');
  });

  describe('treats what a message says as hostile', () => {
    interface AuditRow {
      principal: string | null;
      auth_method: string | null;
      application_name: string | null;
      outcome: string;
      details: Record<string, unknown>;
    }
    const refusalsAudited = (where: string, params: unknown[]) =>
      query<AuditRow>(
        `SELECT principal, auth_method, application_name, outcome, details FROM audit_event
          WHERE action = 'mail.refused' AND ${where} ORDER BY id`,
        params,
      );
    const auditedOnce = async (key: string) => {
      const rows = await waitFor(
        async () => {
          const found = await refusalsAudited(`details->>'message' = $1`, [key]);
          return found.length > 0 ? found : undefined;
        },
        60_000,
        `the audit row of message ${key}`,
      );
      expect(rows).toHaveLength(1);
      return rows[0];
    };
    const sentTo = (pattern: RegExp) =>
      smtp.received.filter((r) => r.envelopeTo.some((address) => pattern.test(address)));
    const job = (subject: string, options: Mail.Options = {}) =>
      compose({
        subject,
        text: 'x',
        attachments: [
          { filename: 'sum.R', content: SUM_SCRIPT },
          { filename: 'data.csv', content: DATA },
        ],
        ...options,
      });

    it('sets a message of thousands of attachments aside once, and takes the message after it (IMAP)', async () => {
      const badKey = await deliver(dovecot, 'jobs', manyAttachments('Thousands', 2000));
      await deliver(dovecot, 'jobs', await job('After thousands'));
      expect(attachmentText(await replyAbout(smtp, 'After thousands'), 'out.txt')).toBe('sum 6\n');
      // Its size and part count came from the server: refused without reading it whole.
      expect((await replyAbout(smtp, 'Thousands')).mail.text).toContain(
        'The message has 2001 MIME parts, more than the limit of 50 (maxParts).',
      );
      expect(await auditedOnce(badKey)).toMatchObject({
        principal: null,
        auth_method: JobSource.EMAIL,
        application_name: APP,
        outcome: 'failure',
        details: { account: 'imap-box', from: 'analyst@example.com' },
      });
      // Out of the way of every node: in the failed folder, no longer in the polled one.
      await waitFor(
        async () => !(await subjectsIn(dovecot, 'jobs', 'INBOX')).includes('Thousands'),
        30_000,
        'the message set aside',
      );
      const setAside = await subjectsIn(dovecot, 'jobs', REFUSED_FOLDER);
      expect(setAside.filter((subject) => subject === 'Thousands')).toHaveLength(1);
      const [row] = await query<{ state: string; rejection: string }>(
        `SELECT state, rejection FROM mail_reply WHERE source = 'imap-box' AND source_key = $1`,
        [badKey],
      );
      expect(row.rejection).toMatch(/2001 MIME parts/);
      expect(smtp.received.filter((r) => r.mail.subject === 'RE: Thousands')).toHaveLength(1);
    });

    it('settles a message the parser gives up on, and takes the message after it (POP3)', async () => {
      await deliver(dovecot, 'popper', manyAttachments('Parser stop', 2000));
      await deliver(dovecot, 'popper', await job('After parser stop'));
      expect(attachmentText(await replyAbout(smtp, 'After parser stop'), 'out.txt')).toBe(
        'sum 6\n',
      );
      // POP3 tells no part count: the parser's own limit (maxParts) ends the parse.
      expect((await replyAbout(smtp, 'Parser stop')).mail.text).toMatch(
        /The message cannot be read: Max allowed child nodes exceeded\./,
      );
      await waitFor(async () => (await messagesIn(dovecot, 'popper')) === 0, 30_000, 'deletion');
      const rows = await refusalsAudited(
        `details->>'account' = 'pop-box' AND details->>'reason' LIKE 'The message cannot be read%'`,
        [],
      );
      expect(rows).toHaveLength(1);
      expect(smtp.received.filter((r) => r.mail.subject === 'RE: Parser stop')).toHaveLength(1);
    });

    it('sends no mail at all for a sender not allowed, whatever Reply-To and Cc say, and audits it', async () => {
      const key = await deliver(
        dovecot,
        'jobs',
        await job('Spam relay', {
          from: 'intruder@elsewhere.org',
          replyTo: 'victim@elsewhere.org',
          cc: ['boss@example.com', 'other@elsewhere.org'],
        }),
      );
      expect(await auditedOnce(key)).toMatchObject({
        outcome: 'failure',
        details: {
          from: 'intruder@elsewhere.org',
          reason: 'intruder@elsewhere.org may not send jobs of application mailer.',
          replyTo: null,
        },
      });
      const [row] = await query<{ state: string }>(
        `SELECT state FROM mail_reply WHERE source = 'imap-box' AND source_key = $1`,
        [key],
      );
      expect(row.state).toBe('none');
      // A later message's reply: the sender has had its rounds since.
      await deliver(dovecot, 'jobs', await compose({ subject: 'After the intruder', text: 'x' }));
      await replyAbout(smtp, 'After the intruder');
      expect(smtp.received.filter((r) => r.mail.subject === 'RE: Spam relay')).toEqual([]);
      expect(sentTo(/@elsewhere\.org$/)).toEqual([]);
      expect(await subjectsIn(dovecot, 'jobs', REFUSED_FOLDER)).toContain('Spam relay');
      expect(await query(`SELECT 1 FROM job WHERE meta->>'emailSubject' = 'Spam relay'`)).toEqual(
        [],
      );
    });

    it('mails the result of a forged allowed From only to allowed addresses, never to its Reply-To', async () => {
      await deliver(
        dovecot,
        'jobs',
        await job('Forged', {
          from: 'analyst@example.com',
          replyTo: 'collector@evil.org',
          cc: ['spy@evil.org', 'boss@example.com'],
        }),
      );
      const reply = await replyAbout(smtp, 'Forged');
      expect(attachmentText(reply, 'out.txt')).toBe('sum 6\n');
      expect(reply.envelopeTo.sort()).toEqual(['analyst@example.com', 'boss@example.com']);
      expect(sentTo(/@evil\.org$/)).toEqual([]);
    });

    it('caps the recipients of one reply (maxReplyRecipients)', async () => {
      await deliver(
        dovecot,
        'jobs',
        await compose({
          subject: 'Everyone',
          text: 'x',
          cc: Array.from({ length: 6 }, (_, i) => `team${i}@example.com`),
        }),
      );
      const reply = await replyAbout(smtp, 'Everyone');
      expect(reply.envelopeTo.sort()).toEqual([
        'analyst@example.com',
        'team0@example.com',
        'team1@example.com',
      ]);
    });

    it("takes only a From vouched for by the operator's server (requireAuthenticationResults)", async () => {
      const unvouched = await deliver(dovecot, 'guarded', await job('Unvouched'));
      // The sender's own header below the server's: a pass the message brought along.
      const forged = await deliver(
        dovecot,
        'guarded',
        await job('Forged pass', {
          headers: [
            {
              key: 'Authentication-Results',
              value: `${AUTHSERV_ID}; spf=pass smtp.mailfrom=example.com; dmarc=fail header.from=example.com`,
            },
            {
              key: 'Authentication-Results',
              value: `${AUTHSERV_ID}; dmarc=pass header.from=example.com`,
            },
          ],
        }),
      );
      const otherServer = await deliver(
        dovecot,
        'guarded',
        await job('Other server', {
          headers: {
            'Authentication-Results': 'mx.evil.org; dmarc=pass header.from=example.com',
          },
        }),
      );
      await deliver(
        dovecot,
        'guarded',
        await job('Vouched', {
          headers: {
            'Authentication-Results': `${AUTHSERV_ID}; dkim=pass header.d=example.com; dmarc=pass (p=reject) header.from=example.com`,
          },
        }),
      );
      expect(attachmentText(await replyAbout(smtp, 'Vouched'), 'out.txt')).toBe('sum 6\n');
      for (const key of [unvouched, forged, otherServer]) {
        expect((await auditedOnce(key)).details.reason).toBe(
          `The message has no DMARC or DKIM pass for example.com from ${AUTHSERV_ID} (requireAuthenticationResults).`,
        );
      }
      expect(
        smtp.received.filter((r) =>
          ['RE: Unvouched', 'RE: Forged pass', 'RE: Other server'].includes(r.mail.subject ?? ''),
        ),
      ).toEqual([]);
      const jobs = await query<{ subject: string }>(
        `SELECT meta->>'emailSubject' AS subject FROM job
          WHERE meta->>'emailSubject' IN ('Unvouched', 'Forged pass', 'Other server', 'Vouched')`,
      );
      expect(jobs).toEqual([{ subject: 'Vouched' }]);
    });
  });
});

const describeWithServer = SERVER_DATABASE_URL ? describe : describe.skip;

describeWithServer('jobs by e-mail on two nodes polling one mailbox', () => {
  it('makes one job and one reply per message', async () => {
    const dovecot = await startDovecot(['shared']);
    const smtp = await startSmtpRecorder();
    const database = await createTestDatabase();
    const nodes: RunningService[] = [];
    try {
      const count = 8;
      for (let i = 0; i < count; i++) {
        await deliver(
          dovecot,
          'shared',
          await compose({
            subject: `Shared ${i}`,
            text: 'x',
            attachments: [{ filename: 'n.R', content: `writeLines("${i}", "n.txt")\n` }],
          }),
        );
      }
      const config = loadConfig(
        testEnvironment(database, {
          EMAIL_ACCOUNTS: JSON.stringify([
            {
              name: 'shared-box',
              mailbox: `imap://shared@127.0.0.1:${dovecot.imapPort}`,
              passwordEnv: 'TEST_MAIL_PASSWORD',
              application: APP,
              pollSeconds: 1,
              replyFrom: REPLY_FROM,
            },
          ]),
          TEST_MAIL_PASSWORD: 'shared-secret',
          SMTP_URL: `smtp://127.0.0.1:${smtp.port}`,
          POLL_INTERVAL_MS: '200',
        }),
      );
      const logger = new PinoLoggerService(config.logLevel);
      nodes.push(await startService(config, logger));
      nodes.push(await startService(config, logger));
      await waitFor(() => Promise.resolve(smtp.received.length >= count), 180_000, 'all replies');
      await waitFor(async () => (await messagesIn(dovecot, 'shared')) === 0, 30_000, 'removal');
      const dataSource = nodes[0].app.get(DataSource);
      const jobs = await dataSource.query<Array<{ subject: string; n: number }>>(
        `SELECT meta->>'emailSubject' AS subject, count(*)::int AS n FROM job GROUP BY 1 ORDER BY 1`,
      );
      expect(jobs).toEqual(
        Array.from({ length: count }, (_, i) => ({ subject: `Shared ${i}`, n: 1 })),
      );
      // A moment for a duplicate to show up, had a node sent one.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(smtp.received.map((r) => r.mail.subject).sort()).toEqual(
        Array.from({ length: count }, (_, i) => `RE: Shared ${i}`).sort(),
      );
      for (const reply of smtp.received) {
        const i = /Shared (\d+)/.exec(reply.mail.subject ?? '')?.[1];
        expect(attachmentText(reply, 'n.txt')).toBe(`${i}\n`);
      }
    } finally {
      for (const node of nodes) {
        await node.close();
      }
      await database.drop();
      await smtp.stop();
      await dovecot.stop();
    }
  });
});
