import { trickle } from "@localdecider/test-env/trickle";
import { FakeUpstream } from "./fake-upstream/server";
import { DeciderProcess } from "./shared/processes";

/** What the built decider says at boot about its settings. */
describe("the decider at boot", () => {
  let fake: FakeUpstream;
  let upstream: string;
  let process_: DeciderProcess | undefined;
  beforeAll(async () => {
    fake = new FakeUpstream();
    upstream = await fake.start();
  });
  afterEach(async () => {
    await process_?.stop();
    process_ = undefined;
  });
  afterAll(async () => {
    await fake.stop();
  });

  const warning = (d: DeciderProcess) => d.lines.find((l) => String(l.message).includes("MAX_OUTPUT_TOKENS"));

  it("warns that LOCALDECIDER_MAX_OUTPUT_TOKENS has no effect when it is set, and says nothing of it when not", async () => {
    const env = { LOCALDECIDER_UPSTREAM: upstream, LOCALDECIDER_UPSTREAM_MODEL: "test-model" };
    process_ = await new DeciderProcess({ ...env, LOCALDECIDER_MAX_OUTPUT_TOKENS: "4096" }).start();
    expect(warning(process_)).toMatchObject({
      level: "warn",
      message: "LOCALDECIDER_MAX_OUTPUT_TOKENS has no effect: each upstream call decodes one token",
      value: 4096,
    });
    await process_.stop();
    process_ = await new DeciderProcess(env).start();
    expect(warning(process_)).toBeUndefined();
  });

  it("warns about a misspelt LOCALDECIDER_ variable with the closest name, and about nothing when all are known", async () => {
    const env = { LOCALDECIDER_UPSTREAM: upstream, LOCALDECIDER_UPSTREAM_MODEL: "test-model" };
    process_ = await new DeciderProcess({ ...env, LOCALDECIDER_PROT: "9999" }).start();
    const unknown = (d: DeciderProcess) => d.lines.filter((l) => String(l.message).includes("is not a variable"));
    expect(unknown(process_)).toStrictEqual([
      expect.objectContaining({
        level: "warn",
        message: "LOCALDECIDER_PROT is not a variable of this service: ignored (did you mean LOCALDECIDER_PORT?)",
        variable: "LOCALDECIDER_PROT",
        closest: "LOCALDECIDER_PORT",
      }),
    ]);
    await process_.stop();
    process_ = await new DeciderProcess(env).start();
    expect(unknown(process_)).toStrictEqual([]);
  });

  it("with LOCALDECIDER_CORS_ORIGINS, lets the listed origin call it from a browser (preflight, then the answer); others get no CORS header", async () => {
    const env = { LOCALDECIDER_UPSTREAM: upstream, LOCALDECIDER_UPSTREAM_MODEL: "test-model" };
    const app = "http://localhost:5173";
    process_ = await new DeciderProcess({ ...env, LOCALDECIDER_CORS_ORIGINS: app }).start();
    const preflight = await fetch(`${process_.url}/v1/systemone`, {
      method: "OPTIONS",
      headers: {
        origin: app,
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type",
      },
    });
    expect([preflight.status, preflight.headers.get("access-control-allow-origin")]).toStrictEqual([204, app]);
    expect(preflight.headers.get("access-control-allow-headers")).toContain("x-typesafe-request-id");
    const models = await fetch(`${process_.url}/v1/models`, { headers: { origin: app } });
    expect([models.status, models.headers.get("access-control-allow-origin")]).toStrictEqual([200, app]);
    // What the backend reused (X-Cached-Tokens) is readable by the page.
    expect(models.headers.get("access-control-expose-headers")).toContain("x-cached-tokens");
    const other = await fetch(`${process_.url}/v1/models`, { headers: { origin: "https://elsewhere.example" } });
    expect(other.headers.get("access-control-allow-origin")).toBeNull();
    await process_.stop();
    process_ = await new DeciderProcess(env).start();
    const off = await fetch(`${process_.url}/v1/models`, { headers: { origin: app } });
    expect(off.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("answers 408 and closes a connection that trickles its headers past LOCALDECIDER_HEADERS_TIMEOUT_MS", async () => {
    process_ = await new DeciderProcess({
      LOCALDECIDER_UPSTREAM: upstream,
      LOCALDECIDER_UPSTREAM_MODEL: "test-model",
      LOCALDECIDER_HEADERS_TIMEOUT_MS: "1000",
      LOCALDECIDER_REQUEST_TIMEOUT_MS: "1000",
      LOCALDECIDER_TIMEOUT_CHECK_MS: "100",
    }).start();
    const { port } = new URL(process_.url);
    const received = await trickle(Number(port), "GET /health HTTP/1.1\r\nX-Slow: ", "the decider");
    expect(received).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
  });
});
