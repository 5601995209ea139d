import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { buildOpenApiDocument, docsRouter } from "@localdecider/service-kit";
import express from "express";
import type { Browser } from "playwright-core";
import { z } from "zod";
import { launchChromium, renderDocs } from "../src/docs-browser";

// A sample service; the real services can reuse renderDocs with their own apps.
const document = buildOpenApiDocument({
  info: { title: "Sample todos", version: "0.1.0" },
  routes: {
    listTodos: {
      method: "get",
      path: "/users/:userId/todos",
      summary: "List a user's todo items",
      auth: "none",
      params: z.object({ userId: z.string() }),
      responses: {
        200: { description: "The items", schema: z.object({ todoItems: z.array(z.object({ id: z.string() })) }) },
      },
    },
    systemOne: {
      method: "post",
      path: "/v1/systemone",
      summary: "Answer questions about a state",
      auth: "none",
      body: z.object({ model: z.string(), state: z.json() }),
      responses: { 200: { description: "Answers", schema: z.object({ model: z.string() }) } },
    },
  },
});

let server: Server;
let baseUrl: string;
let browser: Browser;

beforeAll(async () => {
  const app = express();
  app.use(docsRouter(document));
  server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, "127.0.0.1", () => resolve(s));
  });
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
});

describe("GET /docs in headless Chromium", () => {
  it("renders every endpoint of the document, loading nothing from outside this server", async () => {
    const rendered = await renderDocs(browser, `${baseUrl}/docs`, 2);
    expect(rendered).toStrictEqual({
      title: expect.stringContaining("Sample todos"),
      operations: [
        ["GET", "/users/{userId}/todos", "List a user's todo items"],
        ["POST", "/v1/systemone", "Answer questions about a state"],
      ],
      foreignRequests: [],
      errors: [],
    });
  });
});
