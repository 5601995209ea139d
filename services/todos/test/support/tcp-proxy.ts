import net from "node:net";

/**
 * A loopback TCP proxy in front of PostgreSQL that a test can cut (every open connection destroyed, new
 * ones refused) and restore on the same port: a database outage without touching the machine's Postgres.
 */
export interface TcpProxy {
  port: number;
  cut(): Promise<void>;
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number, targetHost = "127.0.0.1"): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, targetHost);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => undefined); // cut on purpose; the peer sees the close
    }
    client.pipe(upstream).pipe(client);
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
  await listen(0);
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("proxy has no port");
  const port = address.port;
  const stop = async () => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of sockets) s.destroy();
    await closed;
  };
  return {
    port,
    cut: stop,
    restore: () => listen(port),
    close: async () => {
      if (server.listening) await stop();
    },
  };
}
