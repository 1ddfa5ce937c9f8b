import type { Server } from 'node:http';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { serverTimeouts } from '../../src/http/timeouts.js';
import { transportOptions } from '../../src/http/transport.js';
import { startApp, type TestApp } from '../helpers/app.js';
import { makeCertificates } from '../helpers/tls.js';
import { tempFolder } from '../helpers/temp.js';

/** The time-outs of every phase of a connection, as the server gets them. */

describe('server time-outs', () => {
  it('serverTimeouts: the settings as they are, an idle bound past both the request and the handler bounds, checked every second', () => {
    const timeouts = serverTimeouts(loadConfig({}));
    expect(timeouts).toEqual({
      headersTimeout: 10_000,
      requestTimeout: 30_000,
      keepAliveTimeout: 72_000,
      connectionTimeout: 35_000,
      connectionsCheckingInterval: 1000,
    });
    const slowHandlers = serverTimeouts(loadConfig({ ROWI_HANDLER_TIMEOUT: '60000' }));
    expect(slowHandlers.connectionTimeout).toBe(65_000);
  });

  it('serverTimeouts: a header bound past the request bound is a bad setting (exit code 2), naming both', () => {
    const config = loadConfig({ ROWI_HEADERS_TIMEOUT: '20000', ROWI_REQUEST_TIMEOUT: '10000' });
    expect(() => serverTimeouts(config)).toThrow(ConfigError);
    expect(() => serverTimeouts(config)).toThrow(/ROWI_HEADERS_TIMEOUT=20000 .*ROWI_REQUEST_TIMEOUT \(10000\)/);
  });

  it('transportOptions: the HTTPS server gets the same Node time-outs as the HTTP one', () => {
    const certificates = makeCertificates(tempFolder('tls'));
    const options = transportOptions(
      loadConfig({ ROWI_TLS_CERT: certificates.cert, ROWI_TLS_KEY: certificates.key, ROWI_HEADERS_TIMEOUT: '3000' }),
    );
    expect(options.https).toMatchObject({
      minVersion: 'TLSv1.2',
      headersTimeout: 3000,
      requestTimeout: 30_000,
      connectionsCheckingInterval: 1000,
    });
    expect(options.http).toEqual({ headersTimeout: 3000, requestTimeout: 30_000, connectionsCheckingInterval: 1000 });
  });

  describe('the app built with ROWI_HEADERS_TIMEOUT=4000, ROWI_REQUEST_TIMEOUT=8000, ROWI_KEEP_ALIVE_TIMEOUT=65000', () => {
    let test: TestApp;
    beforeAll(async () => {
      test = await startApp({
        ROWI_HEADERS_TIMEOUT: '4000',
        ROWI_REQUEST_TIMEOUT: '8000',
        ROWI_KEEP_ALIVE_TIMEOUT: '65000',
      });
    });
    afterAll(async () => test?.close());

    it('its Node server carries every time-out', () => {
      const server = test.app.server as Server;
      expect({
        headersTimeout: server.headersTimeout,
        requestTimeout: server.requestTimeout,
        keepAliveTimeout: server.keepAliveTimeout,
        idle: server.timeout,
      }).toEqual({ headersTimeout: 4000, requestTimeout: 8000, keepAliveTimeout: 65_000, idle: 20_000 });
    });

    it('buildApp refuses a header bound past the request bound before it listens', async () => {
      const config = { ...test.config, headersTimeout: 9000, requestTimeout: 8000 };
      await expect(buildApp({ config, storage: test.storage, logger: pino({ level: 'silent' }) })).rejects.toThrow(
        ConfigError,
      );
    });
  });
});
