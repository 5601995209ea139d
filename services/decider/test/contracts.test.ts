import { ApiError, ApiRequestError } from "@localdecider/contracts";
import {
  createDeciderClient,
  type DeciderApiError,
  deciderRoutes,
  IMAGES_HEADER,
  type SystemOneResponse,
} from "@localdecider/contracts/decider";
import { type Harness, harness, listen } from "./helpers";
import { PNG_ASSET } from "./image-assets";

type RouteLayer = { route?: { path: string; methods: Record<string, boolean>; stack: { name: string }[] } };

function routeLayers(app: Harness["app"]): RouteLayer[] {
  return (app as unknown as { router: { stack: RouteLayer[] } }).router.stack;
}

/** The kit's 405 catch-all of a path (registerRoutes' methodNotAllowed), which answers every other method. */
const isMethodCatchAll = (layer: RouteLayer) => layer.route?.stack.some((s) => s.name === "methodNotAllowedHandler");

/** The Express routes an app serves, as "METHOD path" (the 405 catch-alls apart). */
function served(app: Harness["app"]): string[] {
  return routeLayers(app).flatMap((layer) =>
    layer.route && !isMethodCatchAll(layer)
      ? Object.keys(layer.route.methods).map((m) => `${m.toUpperCase()} ${layer.route?.path}`)
      : [],
  );
}

describe("the decider's route contracts", () => {
  it("are exactly the routes the app serves (besides /metrics, /openapi.json and /docs)", async () => {
    const h = await harness();
    try {
      expect(served(h.app).sort()).toStrictEqual(
        Object.values(deciderRoutes)
          .map((r) => `${r.method.toUpperCase()} ${r.path}`)
          .sort(),
      );
      // Each contract path also answers its other methods with 405, after its own routes.
      const catchAlls = routeLayers(h.app).filter(isMethodCatchAll);
      expect(catchAlls.map((l) => l.route?.path).sort()).toStrictEqual(
        [...new Set(Object.values(deciderRoutes).map((r) => r.path))].sort(),
      );
    } finally {
      await h.close();
    }
  });
});

describe("the metrics' route labels", () => {
  it("are the contracts' paths for every route called through the client", async () => {
    const h = await harness();
    const server = await listen(h);
    try {
      const client = createDeciderClient({ baseUrl: server.url });
      await client.health();
      await client.ready();
      await client.listModels();
      await client.systemOne({
        body: { model: "localdecider", state: null, questions: { q: { type: "noul", instructions: "Is it?" } } },
      });
      await client.decisions.create({
        model: "localdecider",
        input: "x",
        questions: [{ type: "predicate", instructions: "Is it?" }],
      });
      const text = await (await fetch(`${server.url}/metrics`)).text();
      const labels = new Set([...text.matchAll(/^http_requests_total\{[^}]*route="([^"]+)"/gm)].map((m) => m[1]));
      expect([...labels].sort()).toStrictEqual(
        Object.values(deciderRoutes)
          .map((r) => r.path)
          .sort(),
      );
    } finally {
      await server.close();
      await h.close();
    }
  });
});

describe("createDeciderClient against the running service", () => {
  let h: Harness;
  let server: { url: string; close: () => Promise<void> };

  afterEach(async () => {
    await server.close();
    await h.close();
  });

  it("systemOne() sends the API key and resolves to the typed answers", async () => {
    h = await harness({ apiKey: "secret-key" });
    server = await listen(h);
    h.fake.script = (q): Record<string, number> => (q.name === "billing" ? { true: 0.8, false: 0.2 } : { a: 1, b: 3 });
    const client = createDeciderClient({ baseUrl: server.url, token: "secret-key" });
    const result: SystemOneResponse = await client.systemOne({
      body: {
        model: "localdecider",
        state: { message: "I was charged twice" },
        questions: {
          billing: { type: "noul", instructions: "Is this about billing?" },
          pick: { type: "choice", instructions: "Which one?", criteria: { a: null, b: "the second" } },
        },
      },
    });
    expect(result.model).toBe("localdecider-0.1.0/test-model");
    const billing = result.answers.billing;
    expect(billing?.type === "noul" && billing.noul).toBeCloseTo(0.8, 12);
    const pick = result.answers.pick;
    expect(pick?.type === "choice" && pick.choice).toBe("b");
    expect(result.usage.output_tokens).toBe(2);
  });

  it("listModels(), health() and ready() resolve to their typed bodies", async () => {
    h = await harness({ apiKey: "secret-key" });
    server = await listen(h);
    const client = createDeciderClient({ baseUrl: server.url, token: "secret-key" });
    expect((await client.listModels()).models.map((m) => m.name)).toStrictEqual(["localdecider", "jev-latest", "jev"]);
    expect(await client.health()).toStrictEqual({ status: "ok" });
    expect(await client.ready()).toStrictEqual({
      status: "ready",
      upstream: h.upstream,
      model: "test-model",
      protocol: "chat",
      limits: "this process",
    });
  });

  it("a wrong key throws ApiError 401 with the code, the challenge header and the request id sent", async () => {
    h = await harness({ apiKey: "secret-key" });
    server = await listen(h);
    const client = createDeciderClient({ baseUrl: server.url, token: "wrong" });
    const error: unknown = await client.listModels({ headers: { "x-request-id": "client-req-1" } }).catch((e) => e);
    expect(error).toBeInstanceOf(ApiError);
    const apiError = error as DeciderApiError;
    expect({
      status: apiError.status,
      code: apiError.code,
      message: apiError.message,
      requestId: apiError.requestId,
      operation: apiError.operation,
      details: apiError.details,
    }).toStrictEqual({
      status: 401,
      code: "unauthorized",
      message: "Invalid API key",
      requestId: "client-req-1",
      operation: "GET /v1/models",
      details: undefined,
    });
    expect(apiError.headers.get("www-authenticate")).toBe('Bearer realm="localdecider"');
  });

  it("a body the contract refuses throws ApiError 422 invalid_request with the field details", async () => {
    h = await harness();
    server = await listen(h);
    const client = createDeciderClient({ baseUrl: server.url });
    const error = (await client
      .systemOne({ body: { model: "localdecider", state: null, questions: {} } })
      .catch((e) => e)) as DeciderApiError;
    expect(error).toBeInstanceOf(ApiError);
    expect(error.status).toBe(422);
    expect(error.code).toBe("invalid_request");
    expect(error.details).toStrictEqual([{ path: "questions", message: "questions must hold at least one question" }]);
    expect(error.requestId).toMatch(/\S/);
    expect(h.fake.requests).toHaveLength(0);
  });

  it("more questions than LOCALDECIDER_MAX_QUESTIONS throws ApiError 413 too_many_questions", async () => {
    h = await harness({ maxQuestions: 2 });
    server = await listen(h);
    const client = createDeciderClient({ baseUrl: server.url });
    const question = { type: "noul", instructions: "Is it?" } as const;
    const error = (await client
      .systemOne({ body: { model: "localdecider", state: null, questions: { a: question, b: question, c: question } } })
      .catch((e) => e)) as DeciderApiError;
    expect(error).toBeInstanceOf(ApiError);
    expect({ status: error.status, code: error.code, body: error.body }).toStrictEqual({
      status: 413,
      code: "too_many_questions",
      body: {
        error:
          "this request holds 3 questions, more than the 2 one request may hold (LOCALDECIDER_MAX_QUESTIONS); send them in several requests",
        code: "too_many_questions",
      },
    });
    expect(h.fake.requests).toHaveLength(0);
  });

  it("a box question and an asset, typed by the contract, throw ApiError 422 images_unsupported with the opt-in header", async () => {
    h = await harness();
    server = await listen(h);
    const client = createDeciderClient({ baseUrl: server.url, headers: { [IMAGES_HEADER]: "true" } });
    const error = (await client
      .systemOne({
        body: {
          model: "localdecider",
          state: { photo: "kitchen" },
          questions: {
            mug: { type: "box", instructions: "the coffee mug in `kitchen`" },
            has_mug: { type: "noul", instructions: "Is there a coffee mug in `kitchen`?" },
          },
          assets: { kitchen: PNG_ASSET },
        },
      })
      .catch((e) => e)) as DeciderApiError;
    expect(error).toBeInstanceOf(ApiError);
    expect({ status: error.status, body: error.body }).toStrictEqual({
      status: 422,
      body: {
        error:
          "images and box questions need a native System One upstream; this decider runs a chat model server (OpenAI-compatible, answers read from token logprobs)",
        code: "images_unsupported",
      },
    });
    expect(h.fake.requests).toHaveLength(0);
  });

  it("an unknown model throws ApiError 400 unknown_model", async () => {
    h = await harness();
    server = await listen(h);
    const client = createDeciderClient({ baseUrl: server.url });
    const error = (await client
      .systemOne({ body: { model: "gpt-9", state: null, questions: { q: { type: "noul", instructions: "Is it?" } } } })
      .catch((e) => e)) as DeciderApiError;
    expect([error.status, error.code]).toStrictEqual([400, "unknown_model"]);
  });

  it("a service that is not there throws ApiRequestError with reason network", async () => {
    h = await harness();
    server = await listen(h);
    const url = server.url;
    await server.close();
    server = { url, close: async () => {} };
    const error = await createDeciderClient({ baseUrl: url })
      .health()
      .catch((e) => e);
    expect(error).toBeInstanceOf(ApiRequestError);
    expect((error as ApiRequestError).reason).toBe("network");
    expect((error as ApiRequestError).operation).toBe("GET /health");
  });
});
