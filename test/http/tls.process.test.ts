import { X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { startApp, type TestApp } from '../helpers/app.js';
import { runCli, startServer, tempDataFile, type RunningServer } from '../helpers/process.js';
import { tempFolder } from '../helpers/temp.js';
import { makeCertificates, type Certificates } from '../helpers/tls.js';

const REQUEST_TIMEOUT_MS = 5_000;
const ONE_YEAR = 31_536_000;

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  tlsVersion: string | null;
  peerFingerprint: string;
}

/** One GET over HTTPS on a fresh connection, trusting only the `ca` given. */
function getOverHttps(url: string, ca: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = httpsRequest(
      url,
      { ca, rejectUnauthorized: true, agent: false, timeout: REQUEST_TIMEOUT_MS },
      (response) => {
        const socket = response.socket as TLSSocket;
        const tlsVersion = socket.getProtocol();
        const peerFingerprint = socket.getPeerCertificate().fingerprint256;
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (body += chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, headers: response.headers, body, tlsVersion, peerFingerprint }),
        );
        response.on('error', reject);
      },
    );
    request.on('timeout', () => request.destroy(new Error(`no answer from ${url} within ${REQUEST_TIMEOUT_MS} ms`)));
    request.on('error', reject);
    request.end();
  });
}

/** One GET in plain HTTP; resolves with the status, or with the error the connection ended in. */
function getOverPlainHttp(
  url: string,
): Promise<{ status: number; headers: IncomingHttpHeaders } | { error: NodeJS.ErrnoException }> {
  return new Promise((resolve) => {
    const request = httpRequest(url, { agent: false, timeout: REQUEST_TIMEOUT_MS }, (response) => {
      response.resume();
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers }));
      response.on('error', (error) => resolve({ error }));
    });
    request.on('timeout', () => request.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })));
    request.on('error', (error) => resolve({ error }));
    request.end();
  });
}

/** `rowi serve` settings that never reach a real database or port, plus the ones under test. */
function serveEnv(settings: Record<string, string>): Record<string, string> {
  return { ROWI_HOST: '127.0.0.1', ROWI_PORT: '0', ROWI_DATA: tempDataFile(), ...settings };
}

describe('rowi serve over HTTPS, with a throw-away CA', () => {
  let certificates: Certificates;
  let otherCa: Certificates;
  let server: RunningServer | undefined;

  beforeAll(async () => {
    certificates = makeCertificates(tempFolder('tls'));
    otherCa = makeCertificates(tempFolder('tls-other'));
    server = await startServer({ env: { ROWI_TLS_CERT: certificates.cert, ROWI_TLS_KEY: certificates.key } });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('rowi serve: logs an https:// base URL on loopback when ROWI_TLS_CERT and ROWI_TLS_KEY are set', () => {
    expect(server!.baseUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
  });

  it('GET /v1: 200 JSON with Strict-Transport-Security of at least a year when called over HTTPS trusting the test CA', async () => {
    const answer = await getOverHttps(`${server!.baseUrl}/v1`, certificates.caPem);

    expect(answer.status).toBe(200);
    expect(answer.headers['content-type']).toMatch(/^application\/json\b/);
    expect(() => JSON.parse(answer.body)).not.toThrow();
    const hsts = String(answer.headers['strict-transport-security'] ?? '');
    const maxAge = /(?:^|;)\s*max-age=(\d+)\s*(?:;|$)/i.exec(hsts);
    expect(maxAge, `Strict-Transport-Security: ${hsts}`).not.toBeNull();
    expect(Number(maxAge![1])).toBeGreaterThanOrEqual(ONE_YEAR);
  });

  it('GET /v1/openapi.json: 200 with Strict-Transport-Security when called over HTTPS', async () => {
    const answer = await getOverHttps(`${server!.baseUrl}/v1/openapi.json`, certificates.caPem);

    expect(answer.status).toBe(200);
    expect(answer.headers['strict-transport-security']).toMatch(/max-age=\d+/);
  });

  it('GET /v1: TLS 1.2 or newer, with the certificate from ROWI_TLS_CERT, when the handshake completes', async () => {
    const answer = await getOverHttps(`${server!.baseUrl}/v1`, certificates.caPem);

    expect(['TLSv1.2', 'TLSv1.3']).toContain(answer.tlsVersion);
    expect(answer.peerFingerprint).toBe(new X509Certificate(readFileSync(certificates.cert)).fingerprint256);
  });

  it('GET /v1: refused with a certificate error when the client trusts only another CA', async () => {
    const failure = await getOverHttps(`${server!.baseUrl}/v1`, otherCa.caPem).then(
      (answer) => ({ answered: answer.status }),
      (error: NodeJS.ErrnoException) => error,
    );

    expect(failure).toBeInstanceOf(Error);
    expect((failure as NodeJS.ErrnoException).code).toMatch(
      /^(UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?|SELF_SIGNED_CERT_IN_CHAIN|CERT_SIGNATURE_FAILURE)$/,
    );
  });

  it('GET /v1: no 200 when plain HTTP is sent to the HTTPS port', async () => {
    const outcome = await getOverPlainHttp(`${server!.baseUrl.replace(/^https:/, 'http:')}/v1`);

    if ('status' in outcome) {
      expect(outcome.status).toBeGreaterThanOrEqual(400);
      expect(outcome.headers['strict-transport-security']).toBeUndefined();
    } else {
      expect(outcome.error.code).not.toBe('ETIMEDOUT');
    }
  });
});

describe('rowi serve over plain HTTP', () => {
  let server: RunningServer | undefined;

  beforeAll(async () => {
    server = await startServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('GET /v1: 200 without Strict-Transport-Security when no TLS setting is given', async () => {
    expect(server!.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const outcome = await getOverPlainHttp(`${server!.baseUrl}/v1`);

    expect(outcome).toHaveProperty('status', 200);
    expect((outcome as { headers: IncomingHttpHeaders }).headers['strict-transport-security']).toBeUndefined();
  });
});

describe('TLS and proxy settings that stop rowi before it listens', () => {
  let certificates: Certificates;

  beforeAll(() => {
    certificates = makeCertificates(tempFolder('tls-settings'));
  });

  it('rowi serve: exit code 2 naming ROWI_TLS_KEY when ROWI_TLS_CERT is set without it', async () => {
    const result = await runCli(['serve'], serveEnv({ ROWI_TLS_CERT: certificates.cert }));

    expect(result.code).toBe(2);
    expect(result.stderr).toContain('ROWI_TLS_KEY');
    expect(result.stdout).not.toMatch(/listening on/);
  });

  it('rowi serve: exit code 2 naming ROWI_TLS_CERT when its file does not exist', async () => {
    const missing = join(tempFolder('tls-missing'), 'no-such-cert.pem');
    const result = await runCli(['serve'], serveEnv({ ROWI_TLS_CERT: missing, ROWI_TLS_KEY: certificates.key }));

    expect(result.code).toBe(2);
    expect(result.stderr).toContain('ROWI_TLS_CERT');
    expect(result.stdout).not.toMatch(/listening on/);
  });

  it('loadConfig: throws a ConfigError naming ROWI_TRUST_PROXY when it is not an address list', () => {
    expect(() => loadConfig({ ROWI_DATA: tempDataFile(), ROWI_TRUST_PROXY: 'not-an-ip' })).toThrow(ConfigError);
    expect(() => loadConfig({ ROWI_DATA: tempDataFile(), ROWI_TRUST_PROXY: 'not-an-ip' })).toThrow(/ROWI_TRUST_PROXY/);
  });

  it('rowi serve: exit code 2 naming ROWI_TRUST_PROXY when it is not an address list', async () => {
    const result = await runCli(['serve'], serveEnv({ ROWI_TRUST_PROXY: 'not-an-ip' }));

    expect(result.code).toBe(2);
    expect(result.stderr).toContain('ROWI_TRUST_PROXY');
  });

  it.each(['cafe', '1.2.3.4.5', '10.0.0.0/99', '::::', '127.0.0.1,'])(
    'loadConfig: throws a ConfigError naming ROWI_TRUST_PROXY for %j, which only looks like an address',
    (value) => {
      expect(() => loadConfig({ ROWI_DATA: tempDataFile(), ROWI_TRUST_PROXY: value })).toThrow(/ROWI_TRUST_PROXY/);
    },
  );

  it('loadConfig: accepts IPv4 and IPv6 addresses and CIDR ranges in ROWI_TRUST_PROXY', () => {
    expect(
      loadConfig({ ROWI_DATA: tempDataFile(), ROWI_TRUST_PROXY: '127.0.0.1,10.0.0.0/8,::1,fd00::/8' }).trustProxy,
    ).toBe('127.0.0.1,10.0.0.0/8,::1,fd00::/8');
  });

  it('rowi serve: exit code 2 naming both TLS settings, and no caller created, when the key does not match the certificate', async () => {
    const other = makeCertificates(tempFolder('tls-other'));
    const dataFile = tempDataFile();
    const result = await runCli(
      ['serve'],
      serveEnv({ ROWI_DATA: dataFile, ROWI_TLS_CERT: certificates.cert, ROWI_TLS_KEY: other.key }),
    );

    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/ROWI_TLS_CERT and ROWI_TLS_KEY/);
    expect(result.stderr).not.toMatch(/ROWI_KEY=/);
    const started = await startServer({ dataFile });
    try {
      expect(started.stderr()).toMatch(/ROWI_KEY=rowi_/);
    } finally {
      await started.stop();
    }
  });

  it('rowi serve: exit code 2 naming the TLS settings when the certificate file is not PEM', async () => {
    const notPem = join(tempFolder('tls-not-pem'), 'cert.pem');
    writeFileSync(notPem, 'this is not a certificate\n');
    const result = await runCli(['serve'], serveEnv({ ROWI_TLS_CERT: notPem, ROWI_TLS_KEY: certificates.key }));
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/ROWI_TLS_CERT/);
  });
});

describe('X-Forwarded-Proto and ROWI_TRUST_PROXY (in process; the caller is 127.0.0.1)', () => {
  let trusting: TestApp | undefined;
  let distrusting: TestApp | undefined;

  beforeAll(async () => {
    trusting = await startApp({ ROWI_TRUST_PROXY: '127.0.0.1' });
    distrusting = await startApp({ ROWI_TRUST_PROXY: '10.0.0.1' });
  });
  afterAll(async () => {
    await trusting?.close();
    await distrusting?.close();
  });

  it('GET /v1: Strict-Transport-Security when a trusted proxy says X-Forwarded-Proto: https', async () => {
    const reply = await trusting!.call({ url: '/v1', headers: { 'x-forwarded-proto': 'https' }, key: null });

    expect(reply.status).toBe(200);
    expect(reply.headers['strict-transport-security']).toMatch(/max-age=\d+/);
  });

  it('GET /v1: no Strict-Transport-Security when a trusted proxy forwards plain HTTP', async () => {
    const reply = await trusting!.call({ url: '/v1', key: null });

    expect(reply.status).toBe(200);
    expect(reply.headers['strict-transport-security']).toBeUndefined();
  });

  it('GET /v1: no Strict-Transport-Security when a caller outside ROWI_TRUST_PROXY claims X-Forwarded-Proto: https', async () => {
    const reply = await distrusting!.call({ url: '/v1', headers: { 'x-forwarded-proto': 'https' }, key: null });

    expect(reply.status).toBe(200);
    expect(reply.headers['strict-transport-security']).toBeUndefined();
  });
});
