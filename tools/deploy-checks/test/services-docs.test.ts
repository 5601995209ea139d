import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { metricSample } from "@localdecider/service-kit/test-utils";
import type { Browser } from "playwright-core";
import { launchChromium, renderDocs } from "../src/docs-browser";
import { type RunningService, startService } from "./support/services";

/** [METHOD, path, summary] of every operation in a document, as Swagger UI shows them. */
interface Document {
  paths: Record<string, Record<string, { summary: string }>>;
}
function operationsOf(document: Document): string[][] {
  return Object.entries(document.paths).flatMap(([route, operations]) =>
    Object.entries(operations).map(([method, operation]) => [method.toUpperCase(), route, operation.summary]),
  );
}

const sorted = (rows: string[][]) => [...rows].sort((a, b) => a.join(" ").localeCompare(b.join(" ")));

let browser: Browser;
let dataDir: string;

beforeAll(async () => {
  browser = await launchChromium();
  dataDir = await mkdtemp(path.join(tmpdir(), "todos-docs-"));
});

afterAll(async () => {
  await browser?.close();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

describe.each([
  ["todos", { TODOS_HOST: "127.0.0.1", TODOS_PORT: "0", TODOS_DATA_DIR: "" }],
  // The upstream is never called for /docs; an API key is set to show /docs and /openapi.json stay open.
  [
    "decider",
    {
      LOCALDECIDER_HOST: "127.0.0.1",
      LOCALDECIDER_PORT: "0",
      LOCALDECIDER_UPSTREAM: "http://127.0.0.1:9",
      LOCALDECIDER_API_KEY: "docs-test-key",
    },
  ],
] as const)("the real %s service (dist/main.js): /docs in headless Chromium and /metrics", (service, env) => {
  let running: RunningService;

  beforeAll(async () => {
    running = await startService(service, { ...env, ...(service === "todos" ? { TODOS_DATA_DIR: dataDir } : {}) });
  });

  afterAll(async () => {
    await running?.stop();
  });

  it("shows every operation of its /openapi.json, loading nothing from outside the service", async () => {
    const document = (await (await fetch(`${running.url}/openapi.json`)).json()) as Document;
    const expected = operationsOf(document);
    expect(expected.length).toBeGreaterThanOrEqual(4);
    const rendered = await renderDocs(browser, `${running.url}/docs`, expected.length);
    expect({ ...rendered, operations: sorted(rendered.operations) }).toStrictEqual({
      title: expect.stringContaining(`localdecider ${service}`),
      operations: sorted(expected),
      foreignRequests: [],
      errors: [],
    });
  });

  it("serves /metrics without credentials, with the series main.js wires", async () => {
    if (service === "todos") expect((await fetch(`${running.url}/users/docs-user/todos`)).status).toBe(200);
    const res = await fetch(`${running.url}/metrics`);
    expect(res.status).toBe(200);
    const text = await res.text();
    const series =
      service === "todos"
        ? [metricSample(text, "todos_db_query_duration_seconds_count", { operation: "todoItem.findMany", service })]
        : [metricSample(text, "decider_queue_length", { service }), metricSample(text, "decider_upstream_inflight")];
    expect(series).toStrictEqual(service === "todos" ? [1] : [0, 0]);
  });
});
