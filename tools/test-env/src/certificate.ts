/**
 * A throwaway self-signed X.509 certificate for a TLS server in a test, made with node:crypto alone (no
 * `openssl` command): an ECDSA P-256 key, and a version-3 certificate for the given IP addresses and DNS
 * names, signed with its own key (ecdsa-with-SHA256). What `openssl req -x509 -newkey ec -subj /CN=<name>
 * -addext subjectAltName=...` makes: subject = issuer, subjectAltName, basicConstraints CA:TRUE (so clients
 * can take it as its own trust anchor, e.g. through NODE_EXTRA_CA_CERTS) and a subject key identifier.
 *
 * The DER below is the few ASN.1 types a certificate uses, written by hand: Node can make and sign keys, but
 * not certificates.
 */
import { createHash, generateKeyPairSync, randomBytes, sign } from "node:crypto";
import net from "node:net";

/** One DER element: tag, definite length, contents. */
function der(tag: number, ...contents: Buffer[]): Buffer {
  const body = Buffer.concat(contents);
  const n = body.length;
  let length: Buffer;
  if (n < 0x80) length = Buffer.from([n]);
  else {
    const bytes: number[] = [];
    for (let rest = n; rest > 0; rest = Math.floor(rest / 256)) bytes.unshift(rest % 256);
    length = Buffer.from([0x80 | bytes.length, ...bytes]);
  }
  return Buffer.concat([Buffer.from([tag]), length, body]);
}

const sequence = (...items: Buffer[]) => der(0x30, ...items);
const set = (...items: Buffer[]) => der(0x31, ...items);
const octets = (bytes: Buffer) => der(0x04, bytes);
const explicit = (n: number, item: Buffer) => der(0xa0 + n, item);

function oid(dotted: string): Buffer {
  const [a = 0, b = 0, ...rest] = dotted.split(".").map(Number);
  const bytes = [40 * a + b];
  for (const arc of rest) {
    const base128 = [arc & 0x7f];
    for (let v = Math.floor(arc / 128); v > 0; v = Math.floor(v / 128)) base128.unshift(0x80 | (v & 0x7f));
    bytes.push(...base128);
  }
  return der(0x06, Buffer.from(bytes));
}

/**
 * A non-negative INTEGER from big-endian bytes, in DER's one form: no leading zero byte unless the next one has
 * its top bit set (which would read as negative). OpenSSL refuses any other ("asn1 encoding routines::illegal
 * padding"): a random 16-byte serial starting 0x00 then below 0x80, one certificate in 512, made a test fail.
 */
export function derUnsigned(bytes: Buffer): Buffer {
  let start = 0;
  while (start < bytes.length - 1 && bytes[start] === 0) start++;
  const minimal = bytes.subarray(start);
  const first = minimal[0] ?? 0;
  return der(
    0x02,
    minimal.length === 0 ? Buffer.from([0]) : first >= 0x80 ? Buffer.concat([Buffer.from([0]), minimal]) : minimal,
  );
}

/** UTCTime (YYMMDDHHMMSSZ), the form for dates before 2050. */
function utcTime(date: Date): Buffer {
  const iso = date.toISOString(); // 2026-11-27T10:00:00.000Z
  const text = `${iso.slice(2, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z`;
  return der(0x17, Buffer.from(text, "ascii"));
}

const name = (commonName: string) =>
  sequence(set(sequence(oid("2.5.4.3"), der(0x0c, Buffer.from(commonName, "utf8")))));

function extension(id: string, value: Buffer): Buffer {
  return sequence(oid(id), octets(value));
}

/** The addresses' GeneralNames: iPAddress [7] (4 or 16 bytes), dNSName [2]. */
function altNames(ipAddresses: string[], dnsNames: string[]): Buffer {
  const ips = ipAddresses.map((ip) => {
    if (net.isIPv4(ip)) return der(0x87, Buffer.from(ip.split(".").map(Number)));
    if (!net.isIPv6(ip)) throw new Error(`not an IP address: ${ip}`);
    const groups = ip.includes("::")
      ? (() => {
          const [head = "", tail = ""] = ip.split("::");
          const h = head === "" ? [] : head.split(":");
          const t = tail === "" ? [] : tail.split(":");
          return [...h, ...Array<string>(8 - h.length - t.length).fill("0"), ...t];
        })()
      : ip.split(":");
    const bytes = Buffer.alloc(16);
    for (const [i, g] of groups.entries()) bytes.writeUInt16BE(Number.parseInt(g, 16), i * 2);
    return der(0x87, bytes);
  });
  return sequence(...ips, ...dnsNames.map((dns) => der(0x82, Buffer.from(dns, "ascii"))));
}

export interface SelfSignedCertificate {
  /** The private key, PKCS#8 PEM. */
  key: string;
  /** The certificate, PEM. */
  cert: string;
}

/** A self-signed certificate for `ipAddresses` and `dnsNames` (default: 127.0.0.1), valid from an hour ago. */
export function selfSignedCertificate(
  options: { commonName?: string; ipAddresses?: string[]; dnsNames?: string[]; days?: number } = {},
): SelfSignedCertificate {
  const ipAddresses = options.ipAddresses ?? (options.dnsNames === undefined ? ["127.0.0.1"] : []);
  const dnsNames = options.dnsNames ?? [];
  const commonName = options.commonName ?? ipAddresses[0] ?? dnsNames[0] ?? "localhost";
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  const spki = publicKey.export({ type: "spki", format: "der" });
  // The subject key identifier: SHA-1 of the public key's bits (RFC 5280 4.2.1.2, method 1); the key is the
  // last 65 bytes of a P-256 SubjectPublicKeyInfo (an uncompressed point).
  const keyId = createHash("sha1")
    .update(spki.subarray(spki.length - 65))
    .digest();
  const ecdsaWithSha256 = sequence(oid("1.2.840.10045.4.3.2"));
  const now = Date.now();
  const tbs = sequence(
    explicit(0, der(0x02, Buffer.from([2]))), // v3
    derUnsigned(randomBytes(16)),
    ecdsaWithSha256,
    name(commonName),
    sequence(utcTime(new Date(now - 3_600_000)), utcTime(new Date(now + (options.days ?? 1) * 86_400_000))),
    name(commonName),
    spki,
    der(
      0xa3,
      sequence(
        extension("2.5.29.17", altNames(ipAddresses, dnsNames)),
        extension("2.5.29.19", sequence(der(0x01, Buffer.from([0xff])))),
        extension("2.5.29.14", octets(keyId)),
      ),
    ),
  );
  const signature = sign("sha256", tbs, privateKey); // DER ECDSA-Sig-Value
  const certificate = sequence(tbs, ecdsaWithSha256, der(0x03, Buffer.from([0]), signature));
  const base64 = certificate
    .toString("base64")
    .replace(/(.{64})/g, "$1\n")
    .replace(/\n$/, "");
  return {
    key: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    cert: `-----BEGIN CERTIFICATE-----\n${base64}\n-----END CERTIFICATE-----\n`,
  };
}
