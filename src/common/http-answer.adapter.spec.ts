import 'reflect-metadata';
import { Controller, Get, Header, INestApplication, Post } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { Server } from 'node:http';
import { Readable } from 'node:stream';
import request from 'supertest';
import { HttpAnswer } from './http-answer';
import { HttpAnswerAdapter } from './http-answer.adapter';
import { JsonBody } from './json-body';

@Controller('answers')
class AnswersController {
  @Post('created')
  created(): HttpAnswer {
    return new HttpAnswer(
      { id: 7 },
      { status: 201, headers: { Location: '/answers/7', Vary: 'Accept' } },
    );
  }

  @Get('bytes')
  @Header('Cache-Control', 'no-store')
  bytes(): HttpAnswer {
    return new HttpAnswer(Buffer.from([0, 1, 2, 255]), {
      headers: { 'Content-Type': 'application/octet-stream' },
    });
  }

  @Get('stream')
  stream(): HttpAnswer {
    return new HttpAnswer(Readable.from(['a', 'b', 'c']), {
      headers: { 'Content-Type': 'text/plain; charset=utf-8' },
    });
  }

  @Get('failing-stream')
  failingStream(): HttpAnswer {
    async function* chunks(): AsyncGenerator<string> {
      yield 'first page';
      await new Promise((resolve) => setTimeout(resolve, 10));
      throw new Error('the database went away');
    }
    return new HttpAnswer(Readable.from(chunks()), { headers: { 'Content-Type': 'text/plain' } });
  }

  @Get('unavailable')
  unavailable(): HttpAnswer {
    return new HttpAnswer({ status: 'down' }, { status: 503 });
  }

  @Get('plain')
  plain(): object {
    return { plain: true };
  }

  @Post('json')
  json(@JsonBody() body: unknown): unknown {
    return { echo: body };
  }
}

describe('HttpAnswerAdapter', () => {
  let app: INestApplication;
  const server = (): Server => app.getHttpServer() as Server;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      controllers: [AnswersController],
    }).compile();
    app = moduleRef.createNestApplication(new HttpAnswerAdapter(), {
      bodyParser: false,
      logger: false,
    });
    // CORS's header, which an answer's Vary must keep.
    app.use((_req: unknown, res: { vary(field: string): void }, next: () => void) => {
      res.vary('Origin');
      next();
    });
    await app.init();
  });

  afterAll(async () => {
    await app.close();
  });

  it('applies the status and headers of an HttpAnswer, appending to Vary', async () => {
    const answer = await request(server()).post('/answers/created').expect(201);
    expect(answer.headers.location).toBe('/answers/7');
    expect(answer.headers.vary).toBe('Origin, Accept');
    expect(answer.body).toEqual({ id: 7 });
  });

  it('sends a Buffer as bytes, with its length and an ETag that answers 304', async () => {
    const answer = await request(server())
      .get('/answers/bytes')
      .buffer(true)
      .parse((res, done) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => done(null, Buffer.concat(chunks)));
      })
      .expect(200);
    expect(answer.body).toEqual(Buffer.from([0, 1, 2, 255]));
    expect(answer.headers['content-type']).toBe('application/octet-stream');
    expect(answer.headers['content-length']).toBe('4');
    expect(answer.headers['cache-control']).toBe('no-store');
    expect(answer.headers.etag).toMatch(/^W\/"/);
    const etag = String(answer.headers.etag);
    await request(server()).get('/answers/bytes').set('If-None-Match', etag).expect(304);
  });

  it('streams a Readable under the answer’s Content-Type', async () => {
    const answer = await request(server()).get('/answers/stream').expect(200);
    expect(answer.text).toBe('abc');
    expect(answer.headers['content-type']).toBe('text/plain; charset=utf-8');
  });

  it('cuts the answer when its stream fails midway, so the client sees no complete body', async () => {
    await expect(request(server()).get('/answers/failing-stream')).rejects.toThrow();
  });

  it('sends an object of an HttpAnswer as JSON under the answer’s status', async () => {
    const answer = await request(server()).get('/answers/unavailable').expect(503);
    expect(answer.body).toEqual({ status: 'down' });
  });

  it('leaves other values to Nest', async () => {
    const answer = await request(server()).get('/answers/plain').expect(200);
    expect(answer.body).toEqual({ plain: true });
  });

  it('reads a JSON body for @JsonBody(): 415 for another type, 400 for bad JSON, 413 above the limit', async () => {
    const echoed = await request(server())
      .post('/answers/json')
      .set('Content-Type', 'application/json')
      .send('{"a":1}')
      .expect(201);
    expect(echoed.body).toEqual({ echo: { a: 1 } });
    await request(server())
      .post('/answers/json')
      .set('Content-Type', 'text/plain')
      .send('{"a":1}')
      .expect(415);
    await request(server())
      .post('/answers/json')
      .set('Content-Type', 'application/json')
      .send('{"a":')
      .expect(400);
    await request(server())
      .post('/answers/json')
      .set('Content-Type', 'application/json')
      .send(`"${'x'.repeat(70 * 1024)}"`)
      .expect(413);
  });
});
