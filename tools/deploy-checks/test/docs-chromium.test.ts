import { existsSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { buildOpenApiDocument, docsRouter } from "@localdecider/service-kit";
import express from "express";
import { type Browser, chromium } from "playwright-core";
import { z } from "zod";

// Debian's chromium (installed by .ci/run); CI on GitHub points CHROMIUM_PATH at the runner's Chrome.
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

// A sample service; the real services reuse this check with their own documents.
const document = buildOpenApiDocument({
  info: { title: "Sample todos", version: "0.1.0" },
  routes: [
    {
      method: "get",
      path: "/users/:userId/todos",
      summary: "List a user's todo items",
      params: z.object({ userId: z.string() }),
      responses: {
        200: { description: "The items", schema: z.object({ todoItems: z.array(z.object({ id: z.string() })) }) },
      },
    },
    {
      method: "post",
      path: "/v1/systemone",
      summary: "Answer questions about a state",
      body: z.object({ model: z.string(), state: z.json() }),
      responses: { 200: { description: "Answers", schema: z.object({ model: z.string() }) } },
    },
  ],
});

let server: Server;
let baseUrl: string;
let browser: Browser;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`no browser at ${CHROMIUM}: run .ci/run (installs Debian's chromium) or set CHROMIUM_PATH`);
  }
  const app = express();
  app.use(docsRouter(document));
  server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, "127.0.0.1", () => resolve(s));
  });
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true });
});

afterAll(async () => {
  await browser?.close();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
});

describe("GET /docs in headless Chromium", () => {
  it("renders every endpoint of the document, loading nothing from outside this server", async () => {
    const page = await browser.newPage();
    const foreign: string[] = [];
    const errors: string[] = [];
    page.on("request", (req) => {
      const url = req.url();
      if (!url.startsWith(baseUrl) && !url.startsWith("data:")) foreign.push(url);
    });
    page.on("pageerror", (err) => errors.push(err.message));
    page.on("console", (msg) => {
      if (msg.type() === "error") errors.push(msg.text());
    });

    await page.goto(`${baseUrl}/docs`);
    await page.locator(".opblock").nth(1).waitFor({ timeout: 30_000 });

    const operations = await page
      .locator(".opblock")
      .evaluateAll((blocks) =>
        blocks.map((block) =>
          [".opblock-summary-method", ".opblock-summary-path", ".opblock-summary-description"].map((part) =>
            (block.querySelector(part)?.textContent ?? "").trim(),
          ),
        ),
      );
    expect(operations).toStrictEqual([
      ["GET", "/users/{userId}/todos", "List a user's todo items"],
      ["POST", "/v1/systemone", "Answer questions about a state"],
    ]);
    expect(await page.locator(".info .title").textContent()).toContain("Sample todos");
    expect(foreign).toStrictEqual([]);
    expect(errors).toStrictEqual([]);
    await page.close();
  });
});
