import { trickle } from "@localdecider/test-env/trickle";
import { startService } from "./support/service-process";
import { postgresMode, type StorageLocation } from "./support/storage-modes";

/**
 * The built service with small connection limits (TODOS_*_TIMEOUT_MS): a client trickling its headers or its
 * body is answered 408 and closed. The service kit's own tests cover each limit; this one shows main.ts
 * passes the variables on.
 */
describe("the built service's connection limits", () => {
  let location: StorageLocation;

  beforeAll(async () => {
    location = await postgresMode.locate();
  });

  afterAll(async () => {
    await location?.dispose();
  });

  it("answers 408 and closes connections that trickle their headers or their body", async () => {
    const service = await startService({
      PATH: process.env.PATH ?? "",
      LOG_LEVEL: "info",
      TODOS_PORT: "0",
      DATABASE_URL: location.options.databaseUrl ?? "",
      TODOS_HEADERS_TIMEOUT_MS: "1000",
      TODOS_REQUEST_TIMEOUT_MS: "1500",
      TODOS_TIMEOUT_CHECK_MS: "100",
    });
    try {
      const [headers, body] = await Promise.all([
        trickle(service.port, "GET /users/alice/todos HTTP/1.1\r\nHost: localhost\r\nX-Slow: ", "todos"),
        trickle(
          service.port,
          "POST /users/alice/todos HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
          "todos",
        ),
      ]);
      expect([headers, body].map((text) => text.split("\r\n")[0])).toStrictEqual([
        "HTTP/1.1 408 Request Timeout",
        "HTTP/1.1 408 Request Timeout",
      ]);
    } finally {
      service.child.kill("SIGTERM");
      expect(await service.exited).toBe(0);
    }
  });
});
