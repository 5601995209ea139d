import { createServer, type Server } from "node:http";
import net, { type AddressInfo } from "node:net";

/**
 * A forward proxy on loopback that speaks only CONNECT, as corporate proxies do for https: it records each
 * CONNECT's target (`host:port`) and either refuses it with `refuse` or opens the tunnel to `tunnelTo`,
 * whatever host was asked for (the tests ask for names that do not resolve, so only the proxy can reach them).
 */
export class ConnectProxy {
  readonly connects: string[] = [];
  /** Answer every CONNECT with this status instead of opening a tunnel. */
  refuse: number | undefined;
  private server: Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  url = "";

  constructor(private readonly tunnelTo?: { host: string; port: number }) {}

  async start(): Promise<string> {
    const server = createServer((_req, res) => res.writeHead(405, { allow: "CONNECT" }).end());
    server.on("connect", (req, client: net.Socket, head: Buffer) => {
      this.sockets.add(client);
      client.on("close", () => this.sockets.delete(client));
      client.on("error", () => client.destroy());
      this.connects.push(req.url ?? "");
      if (this.refuse !== undefined || this.tunnelTo === undefined) {
        client.end(`HTTP/1.1 ${this.refuse ?? 502} Refused by the test proxy\r\n\r\n`);
        return;
      }
      const upstream = net.connect(this.tunnelTo.port, this.tunnelTo.host, () => {
        client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
        if (head.length > 0) upstream.write(head);
        upstream.pipe(client);
        client.pipe(upstream);
      });
      this.sockets.add(upstream);
      upstream.on("close", () => this.sockets.delete(upstream));
      upstream.on("error", () => client.destroy());
    });
    this.server = server;
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return this.url;
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}
