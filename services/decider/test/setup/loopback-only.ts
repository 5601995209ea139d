import net from "node:net";

/**
 * Tests may talk to loopback only: any other outbound connection (a real model server, the internet)
 * fails loudly instead of making a test depend on the machine it runs on.
 */
const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost", "::ffff:127.0.0.1"]);
const connect = net.Socket.prototype.connect;

function hostOf(args: unknown[]): string | undefined {
  // net.connect() passes its already-normalised arguments as one array.
  const [first, second] = Array.isArray(args[0]) ? (args[0] as unknown[]) : args;
  if (typeof first === "object" && first !== null) {
    const options = first as { host?: string; path?: string };
    return options.path !== undefined ? undefined : (options.host ?? "localhost");
  }
  if (typeof first === "number") return typeof second === "string" ? second : "localhost";
  return undefined; // a unix socket path
}

net.Socket.prototype.connect = function (this: net.Socket, ...args: unknown[]) {
  const host = hostOf(args);
  if (host !== undefined && !LOOPBACK.has(host)) {
    throw new Error(`test tried to connect to ${host}: only loopback is allowed in tests`);
  }
  return (connect as (...a: unknown[]) => net.Socket).apply(this, args);
} as typeof connect;
