import type { MessageEvent, Provider, Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { Request, Response } from 'express';
import { Readable } from 'node:stream';
import type { Observable } from 'rxjs';
import { ApiError } from '../../src/common/api-error';
import { EventStream } from '../../src/common/event-stream';
import { HeldRights } from '../../src/security/held-rights';

/** The public base URL every controller spec configures: no request's Host is read. */
export const BASE = 'https://svc.example';

/** The controller, built by a TestingModule from `providers` (its services or their doubles). */
export async function controllerOf<T>(controller: Type<T>, providers: Provider[]): Promise<T> {
  const module = await Test.createTestingModule({
    controllers: [controller],
    providers,
  }).compile();
  return module.get(controller);
}

export interface FakeRequestInit {
  method?: string;
  path?: string;
  /** As sent: names keep their case in rawHeaders, lower-cased in headers. */
  headers?: Record<string, string>;
  query?: Record<string, unknown>;
  body?: string | Buffer;
}

/** An Express request as far as controllers read it: a readable body, headers, path, query. */
export function fakeRequest(init: FakeRequestInit = {}): Request {
  const body = init.body === undefined ? [] : [Buffer.from(init.body)];
  const req = Readable.from(body) as unknown as Request & Record<string, unknown>;
  const headers = Object.fromEntries(
    Object.entries(init.headers ?? {}).map(([name, value]) => [name.toLowerCase(), value]),
  );
  Object.assign(req, {
    method: init.method ?? 'GET',
    path: init.path ?? '/',
    originalUrl: init.path ?? '/',
    url: init.path ?? '/',
    headers,
    rawHeaders: Object.entries(init.headers ?? {}).flat(),
    query: init.query ?? {},
    socket: {},
  });
  return req;
}

/** What a controller wrote to an Express response it was handed (`@Res()`). */
export interface FakeResponse extends Response {
  written: { status: number; headers: Record<string, string>; body: unknown };
}

export function fakeResponse(): FakeResponse {
  const written = {
    status: 200,
    headers: {} as Record<string, string>,
    body: undefined as unknown,
  };
  const res = {
    written,
    status(code: number) {
      written.status = code;
      return res;
    },
    type(value: string) {
      written.headers['content-type'] = value;
      return res;
    },
    setHeader(name: string, value: string) {
      written.headers[name.toLowerCase()] = value;
      return res;
    },
    send(body: unknown) {
      written.body = body;
      return res;
    },
    end(body?: unknown) {
      written.body = body;
      return res;
    },
  };
  return res as unknown as FakeResponse;
}

/** The ApiError `action` fails with: its status and message, for `toMatchObject`. */
export async function apiErrorOf(
  action: () => unknown,
): Promise<{ status: number; message: string }> {
  try {
    await action();
  } catch (error) {
    if (error instanceof ApiError) {
      return { status: error.getStatus(), message: error.message };
    }
    throw error;
  }
  throw new Error('expected an ApiError, but the call succeeded');
}

/** An EventStream of `events` (a producer that sends each as it comes, for unit tests). */
export function eventStreamOf(events: Observable<MessageEvent>): EventStream {
  return new EventStream((sink) => {
    const subscription = events.subscribe({
      next: (event) => sink.next(event),
      complete: () => sink.complete(),
    });
    return () => subscription.unsubscribe();
  });
}

/** HeldRights that hold nothing: the rights a stream was opened with never change. */
export const UNCHANGING_RIGHTS: Provider = {
  provide: HeldRights,
  useValue: { hold: () => () => undefined },
};
