/**
 * Starting and stopping the test fakes' HTTP servers (fake model servers, upstreams, download hosts): on
 * loopback only, and stopped without waiting for clients, since a test's decider may hold keep-alive
 * connections or calls in flight that would keep close() waiting.
 */
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";

/** Listens on 127.0.0.1: a free port, or `port` (to come back where it was after a crash); answers the port. */
export async function listenOnLoopback(server: Server, port = 0): Promise<number> {
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}

/** Cuts every connection (calls in flight see a reset, none an answer), then stops listening. */
export async function closeAbruptly(server: Server | undefined): Promise<void> {
  if (server === undefined) return;
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}
