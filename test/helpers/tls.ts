import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Certificates {
  /** PEM file of the throw-away CA: what a client passes as `ca` to trust the server. */
  caCert: string;
  /** PEM file of the server certificate for 127.0.0.1 and localhost, signed by the CA (ROWI_TLS_CERT). */
  cert: string;
  /** PEM file of the server's private key (ROWI_TLS_KEY). */
  key: string;
  /** The CA certificate's PEM text. */
  caPem: string;
}

/** Two days is enough for any test run, and short enough that nothing can reuse the files. */
const VALID_DAYS = '2';

/**
 * A throw-away CA and a server certificate it signed, written into `folder` with the openssl
 * CLI. EC P-256 keys keep it to a few milliseconds; fixed subjects and serial numbers keep
 * everything but the keys and dates the same from run to run. openssl's chatter is captured
 * and shown only when a step fails.
 */
export function makeCertificates(folder: string): Certificates {
  const file = (name: string) => join(folder, name);
  const caKey = file('ca.key.pem');
  const caCert = file('ca.cert.pem');
  const key = file('server.key.pem');
  const request = file('server.csr.pem');
  const cert = file('server.cert.pem');
  const extensions = file('server.ext');

  newKey(caKey);
  openssl([
    'req',
    '-x509',
    '-new',
    '-key',
    caKey,
    '-sha256',
    '-days',
    VALID_DAYS,
    '-set_serial',
    '1',
    '-subj',
    '/CN=rowi test CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
    '-out',
    caCert,
  ]);

  newKey(key);
  openssl(['req', '-new', '-key', key, '-sha256', '-subj', '/CN=127.0.0.1', '-out', request]);
  // Clients match the address they dialled against subjectAltName, never the CN (RFC 6125 §6.4.4).
  writeFileSync(
    extensions,
    [
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature',
      'extendedKeyUsage=serverAuth',
      'subjectAltName=IP:127.0.0.1,DNS:localhost',
      'subjectKeyIdentifier=hash',
      'authorityKeyIdentifier=keyid',
    ].join('\n') + '\n',
  );
  openssl([
    'x509',
    '-req',
    '-in',
    request,
    '-CA',
    caCert,
    '-CAkey',
    caKey,
    '-sha256',
    '-days',
    VALID_DAYS,
    '-set_serial',
    '2',
    '-extfile',
    extensions,
    '-out',
    cert,
  ]);

  return { caCert, cert, key, caPem: readFileSync(caCert, 'utf8') };
}

function newKey(path: string): void {
  openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', path]);
}

function openssl(args: string[]): void {
  try {
    execFileSync('openssl', args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: 10_000 });
  } catch (error) {
    const stderr = String((error as { stderr?: Buffer }).stderr ?? '');
    throw new Error(`openssl ${args.join(' ')} failed: ${(error as Error).message}\n${stderr}`);
  }
}
