import { Answer, request, REST } from './rest-client';

/** A part of a multipart form: a text field, or a file with its name and type. */
export type FormPart =
  | { field: string; value: string }
  | { field: string; filename: string; content: string | Buffer; type?: string };

export function textField(field: string, value: string): FormPart {
  return { field, value };
}

export function fileField(
  filename: string,
  content: string | Buffer,
  type = 'application/octet-stream',
  field = 'X-SVC-JobFile[]',
): FormPart {
  return { field, filename, content, type };
}

/** The parts as a FormData, in order; fetch writes it as multipart/form-data with a boundary. */
export function formData(parts: FormPart[]): FormData {
  const form = new FormData();
  for (const part of parts) {
    if ('value' in part) {
      form.append(part.field, part.value);
    } else {
      const bytes = typeof part.content === 'string' ? Buffer.from(part.content) : part.content;
      form.append(part.field, new Blob([bytes], { type: part.type }), part.filename);
    }
  }
  return form;
}

/** Posts a browser-style form to the job endpoint. */
export async function postForm(
  base: string,
  parts: FormPart[],
  headers: Record<string, string> = {},
): Promise<Answer> {
  return request(`${base}${REST}/jobs`, { method: 'POST', body: formData(parts), headers });
}
