import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Request, Response } from 'express';
import multer, { MulterError } from 'multer';
import { ApiError } from '../common/api-error';

export interface FormLimits {
  maxFiles: number;
  maxFields: number;
  maxFieldBytes: number;
  /** The largest single file, and the largest whole request body. */
  maxRequestBytes: number;
  /** Where the files wait; null for the system's temp directory. */
  tempDir: string | null;
}

/** A file part of a received form, already on disk. */
export interface ReceivedFile {
  /** The form field it came in, as sent. */
  field: string;
  /** The name the browser gave it (may carry a client path). */
  originalName: string;
  mimeType: string;
  size: number;
  path: string;
}

export interface ReceivedForm {
  /** Text fields as [name, value] pairs in the order sent, repeats kept. */
  fields: Array<[name: string, value: string]>;
  /** File parts that carry a file; parts with no file chosen are left out. */
  files: ReceivedFile[];
}

/** What multer calls to feed busboy; not in @types/multer. */
type StreamHandler = (req: Request, busboy: NodeJS.WritableStream & BusboyEvents) => void;
interface BusboyEvents {
  on(event: 'field', listener: (name: string, value: string) => void): this;
  destroy(error?: Error): void;
}

/**
 * Multer keeps text fields in `req.body` folded by name (repeats merged, brackets nested), which
 * hides a field given twice. The raw pairs are read from the same parser, with the escapes the
 * HTML form encoding applies to names reversed as multer does.
 */
function decodeFormDataName(name: string): string {
  const decoded: Record<string, string> = { '%0A': '\n', '%0D': '\r', '%22': '"' };
  return name.replace(/%0A|%0D|%22/gi, (escape) => decoded[escape.toUpperCase()]);
}

const LIMIT_MESSAGES: Partial<Record<string, (limits: FormLimits) => string>> = {
  LIMIT_FILE_SIZE: (l) => `a file of the form is larger than ${l.maxRequestBytes} bytes`,
  LIMIT_FILE_COUNT: (l) => `the form has more than ${l.maxFiles} files`,
  LIMIT_FIELD_COUNT: (l) => `the form has more than ${l.maxFields} fields`,
  LIMIT_FIELD_VALUE: (l) => `a form field's value is longer than ${l.maxFieldBytes} bytes`,
  LIMIT_FIELD_KEY: () => 'a form field name is longer than 100 bytes',
  LIMIT_PART_COUNT: (l) => `the form has more than ${l.maxFiles + l.maxFields} parts`,
};

/** A parser failure as the client's error: 413 over a limit, else 400 for a malformed form. */
function formError(error: unknown, limits: FormLimits): ApiError {
  if (error instanceof ApiError) {
    return error;
  }
  if (error instanceof MulterError) {
    const message = LIMIT_MESSAGES[error.code];
    const field = error.field ? ` (field "${error.field}")` : '';
    return message
      ? ApiError.payloadTooLarge(`${message(limits)}${field}, the allowed maximum`)
      : ApiError.badRequest(`the form cannot be read: ${error.message}${field}`);
  }
  const text = error instanceof Error ? error.message : String(error);
  return ApiError.badRequest(`the multipart/form-data body cannot be read: ${text}`);
}

function tooLarge(limits: FormLimits): ApiError {
  return ApiError.payloadTooLarge(
    `the form is larger than ${limits.maxRequestBytes} bytes, the allowed maximum`,
  );
}

/**
 * Receives a multipart form: files stream to a temp directory of their own (never the whole
 * upload in memory), text fields are kept as sent. Limits: the number of files and of fields,
 * each field's size, each file's and the whole body's size (413). `use` gets the form while its
 * files exist; they are removed afterwards, whatever happens.
 */
export async function withReceivedForm<T>(
  req: Request,
  limits: FormLimits,
  use: (form: ReceivedForm) => Promise<T>,
): Promise<T> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limits.maxRequestBytes) {
    // Known too big before a byte is read: refuse at once (the filter drains a bounded rest, answers, closes).
    throw tooLarge(limits);
  }
  const directory = await mkdtemp(join(limits.tempDir ?? tmpdir(), 'svc-form-'));
  try {
    const fields: Array<[string, string]> = [];
    const streamHandler: StreamHandler = (request, busboy) => {
      busboy.on('field', (name, value) => fields.push([decodeFormDataName(name), value]));
      let received = 0;
      request.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (received > limits.maxRequestBytes) {
          busboy.destroy(tooLarge(limits));
        }
      });
      request.pipe(busboy);
    };
    const middleware = multer({
      storage: multer.diskStorage({ destination: directory }),
      limits: {
        files: limits.maxFiles,
        fields: limits.maxFields,
        fieldSize: limits.maxFieldBytes,
        fileSize: limits.maxRequestBytes,
        // Names like a[99999999] would make multer build a huge sparse array in req.body.
        fieldArrayIndexLimit: 100,
      },
      // Browsers send UTF-8 file names without saying so.
      defParamCharset: 'utf8',
      streamHandler,
    } as multer.Options & { streamHandler: StreamHandler }).any();
    await new Promise<void>((resolve, reject) => {
      // A middleware's signature; multer reads the request only, never the response.
      middleware(req, undefined as unknown as Response, (error?: unknown) =>
        error ? reject(formError(error, limits)) : resolve(),
      );
    });
    const files = ((req.files ?? []) as Express.Multer.File[]).map((file) => ({
      field: file.fieldname,
      originalName: file.originalname,
      mimeType: file.mimetype,
      size: file.size,
      path: file.path,
    }));
    return await use({ fields, files });
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}
