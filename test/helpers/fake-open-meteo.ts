import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/**
 * A real HTTP server on 127.0.0.1 that plays Open-Meteo's forecast API
 * (GET /v1/forecast?…&current=…), well or in one of the ways an upstream goes wrong.
 */
export type FakeBehaviour =
  | 'normal'
  | 'slow'
  | 'status-500'
  | 'malformed-json'
  | 'truncated'
  | 'huge'
  | 'reset'
  | 'hang'
  | 'not-json'
  | 'error-400'
  | 'redirect';

export interface FakeCurrent {
  time: string;
  temperature_2m: number;
  relative_humidity_2m: number;
  wind_speed_10m: number;
  weather_code: number;
}

export interface FakeOpenMeteo {
  /** http://127.0.0.1:PORT */
  url: string;
  /** Requests received. */
  readonly calls: number;
  readonly requests: URL[];
  readonly requestHeaders: IncomingHttpHeaders[];
  /** Answers whose connection closed before the whole body was sent ('huge' read only in part). */
  readonly closedEarly: number;
  behave(mode: FakeBehaviour, options?: { delayMs?: number }): void;
  setCurrent(values: Partial<FakeCurrent>): void;
  /** Replaces top-level members of the 'normal' answer (current_units, utc_offset_seconds…). */
  overrideAnswer(fields: Record<string, unknown>): void;
  close(): Promise<void>;
}

export const OPEN_METEO_UNITS = {
  time: 'iso8601',
  interval: 'seconds',
  temperature_2m: '°C',
  relative_humidity_2m: '%',
  wind_speed_10m: 'km/h',
  weather_code: 'wmo code',
};

const HUGE_BYTES = 5 * 1024 * 1024;

/** The current UTC quarter-hour as Open-Meteo writes `current.time` with timezone=GMT. */
function currentQuarterHour(): string {
  const quarter = 15 * 60 * 1000;
  return new Date(Math.floor(Date.now() / quarter) * quarter).toISOString().slice(0, 16);
}

function drainedOrClosed(response: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      response.off('drain', done).off('close', done);
      resolve();
    };
    response.on('drain', done).on('close', done);
  });
}

export async function startFakeOpenMeteo(): Promise<FakeOpenMeteo> {
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const requests: URL[] = [];
  const requestHeaders: IncomingHttpHeaders[] = [];
  let mode: FakeBehaviour = 'normal';
  let delayMs = 3000;
  let current: Partial<FakeCurrent> = {};
  let overrides: Record<string, unknown> = {};
  let closedEarly = 0;

  const answerFor = (url: URL) => ({
    latitude: Number(url.searchParams.get('latitude')),
    longitude: Number(url.searchParams.get('longitude')),
    generationtime_ms: 0.05,
    utc_offset_seconds: 0,
    timezone: 'GMT',
    timezone_abbreviation: 'GMT',
    elevation: 38.0,
    current_units: OPEN_METEO_UNITS,
    current: {
      time: currentQuarterHour(),
      interval: 900,
      temperature_2m: 5.3,
      relative_humidity_2m: 81,
      wind_speed_10m: 12.2,
      weather_code: 3,
      ...current,
    },
    ...overrides,
  });

  const sendJson = (response: ServerResponse, status: number, body: string) => {
    response.writeHead(status, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
    });
    response.end(body);
  };

  const streamHuge = async (response: ServerResponse, url: URL) => {
    response.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
    const tail = `","answer":${JSON.stringify(answerFor(url))}}`;
    const chunk = 'x'.repeat(64 * 1024);
    response.write('{"padding":"');
    for (let sent = 0; sent < HUGE_BYTES; sent += chunk.length) {
      if (response.destroyed) {
        closedEarly++;
        return;
      }
      // Respect backpressure: a client that stops reading stops the stream here.
      if (!response.write(chunk)) await drainedOrClosed(response);
    }
    response.end(tail);
  };

  const answer = (request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? '/', 'http://127.0.0.1');
    requests.push(url);
    requestHeaders.push(request.headers);
    const body = JSON.stringify(answerFor(url));
    switch (mode) {
      case 'normal':
        return sendJson(response, 200, body);
      case 'slow': {
        const timer = setTimeout(() => {
          timers.delete(timer);
          if (!response.destroyed) sendJson(response, 200, body);
        }, delayMs);
        timers.add(timer);
        return;
      }
      case 'status-500':
        return sendJson(response, 500, '{"error":true,"reason":"Internal server error"}');
      case 'malformed-json':
        return sendJson(response, 200, '{"current": {');
      case 'truncated':
        response.writeHead(200, {
          'content-type': 'application/json; charset=utf-8',
          'content-length': Buffer.byteLength(body) + 100,
        });
        response.write(body.slice(0, 40), () => request.socket.destroy());
        return;
      case 'huge':
        void streamHuge(response, url);
        return;
      case 'reset':
        request.socket.resetAndDestroy();
        return;
      case 'hang':
        return;
      case 'not-json':
        response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
        response.end('<!doctype html><title>Maintenance</title><p>Back soon.</p>');
        return;
      case 'error-400':
        return sendJson(
          response,
          400,
          '{"error":true,"reason":"Latitude must be in range of -90 to 90°. Given: 91.0."}',
        );
      case 'redirect':
        response.writeHead(302, { location: 'https://elsewhere.example/v1/forecast' });
        response.end();
        return;
    }
  };

  const server = createServer(answer);
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen({ host: '127.0.0.1', port: 0 }, resolve));
  const port = (server.address() as { port: number }).port;

  return {
    url: `http://127.0.0.1:${port}`,
    get calls() {
      return requests.length;
    },
    requests,
    requestHeaders,
    get closedEarly() {
      return closedEarly;
    },
    behave(next, options = {}) {
      mode = next;
      delayMs = options.delayMs ?? 3000;
    },
    setCurrent(values) {
      current = { ...current, ...values };
    },
    overrideAnswer(fields) {
      overrides = { ...overrides, ...fields };
    },
    async close() {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}
