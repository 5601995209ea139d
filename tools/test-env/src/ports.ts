import net from "node:net";

/**
 * A loopback port free at the time of asking: listened on, then given back, for a server the caller starts
 * next. Another process may take it in between; the servers the suites start here are few and short-lived.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address() as net.AddressInfo;
      server.close(() => resolve(address.port));
    });
  });
}
