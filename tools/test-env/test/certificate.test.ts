import { X509Certificate } from "node:crypto";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import tls from "node:tls";
import { derUnsigned, selfSignedCertificate } from "../src/certificate";

/** An HTTPS server on loopback with the certificate; resolves its port. */
async function httpsServer(key: string, cert: string) {
  const server = createServer({ key, cert }, (_req, res) => res.end("hello over tls"));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { port: (server.address() as AddressInfo).port, close: () => new Promise((r) => server.close(r)) };
}

/** Connects with `ca` as the only trust anchor; resolves what the server said, or rejects with TLS's reason. */
function get(port: number, ca: string, servername?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: "127.0.0.1", port, ca, ...(servername ? { servername } : {}) }, () => {
      socket.write("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    });
    let text = "";
    socket.on("data", (c: Buffer) => {
      text += c.toString();
    });
    socket.on("end", () => resolve(text));
    socket.on("error", reject);
  });
}

describe("derUnsigned", () => {
  it.each<[number[], number[]]>([
    [[0x12], [0x02, 0x01, 0x12]],
    [
      [0x00, 0x12],
      [0x02, 0x01, 0x12],
    ],
    [
      [0x00, 0x00, 0x7f, 0x01],
      [0x02, 0x02, 0x7f, 0x01],
    ],
    [[0x80], [0x02, 0x02, 0x00, 0x80]],
    [
      [0x00, 0x00, 0x80],
      [0x02, 0x02, 0x00, 0x80],
    ],
    [[0x00], [0x02, 0x01, 0x00]],
    [
      [0x00, 0x00],
      [0x02, 0x01, 0x00],
    ],
  ])("writes %j in DER's one form, %j", (bytes, encoded) => {
    expect([...derUnsigned(Buffer.from(bytes))]).toStrictEqual(encoded);
  });
});

describe("selfSignedCertificate", () => {
  it("makes certificates OpenSSL always loads: 300 in a row, whatever their random serial", () => {
    for (let i = 0; i < 300; i++) {
      const { key, cert } = selfSignedCertificate();
      expect(() => tls.createSecureContext({ key, cert })).not.toThrow();
    }
  });

  it("makes a v3 certificate that node:crypto reads: self-issued, self-verifying, for 127.0.0.1, a CA, valid now", () => {
    const { key, cert } = selfSignedCertificate();
    const x509 = new X509Certificate(cert);
    expect(x509.subject).toBe("CN=127.0.0.1");
    expect(x509.issuer).toBe("CN=127.0.0.1");
    expect(x509.subjectAltName).toBe("IP Address:127.0.0.1");
    expect(x509.ca).toBe(true);
    expect(x509.verify(x509.publicKey)).toBe(true);
    expect(x509.checkPrivateKey(require("node:crypto").createPrivateKey(key))).toBe(true);
    expect(x509.checkIP("127.0.0.1")).toBe("127.0.0.1");
    expect(new Date(x509.validFrom).getTime()).toBeLessThan(Date.now());
    expect(new Date(x509.validTo).getTime()).toBeGreaterThan(Date.now());
  });

  it("names DNS names and IPv6 addresses too", () => {
    const x509 = new X509Certificate(
      selfSignedCertificate({ ipAddresses: ["::1", "127.0.0.1"], dnsNames: ["localhost"] }).cert,
    );
    expect(x509.subjectAltName).toBe("IP Address:0:0:0:0:0:0:0:1, IP Address:127.0.0.1, DNS:localhost");
  });

  it("serves TLS to a client that trusts it, and a client that trusts another certificate refuses it", async () => {
    const mine = selfSignedCertificate();
    const other = selfSignedCertificate();
    const server = await httpsServer(mine.key, mine.cert);
    try {
      expect(await get(server.port, mine.cert)).toMatch(/hello over tls$/);
      await expect(get(server.port, other.cert)).rejects.toThrow(/self.signed certificate|unable to verify/i);
      // Named for 127.0.0.1 only: a client that expects another name refuses it.
      await expect(get(server.port, mine.cert, "example.test")).rejects.toThrow(/does not match|not in the cert/i);
    } finally {
      await server.close();
    }
  });
});
