import { buildOpenApiDocument } from "@localdecider/service-kit";
import { ROUTE_DOCS } from "../src/routes";
import { harness } from "./helpers";

describe("ROUTE_DOCS", () => {
  it("documents exactly the routes the app serves and builds an OpenAPI document", async () => {
    const h = await harness();
    try {
      // Express 5 keeps its routes in app.router.stack: every documented path must be registered.
      const stack = (
        h.app as unknown as { router: { stack: { route?: { path: string; methods: Record<string, boolean> } }[] } }
      ).router.stack;
      const served = stack.flatMap((layer) =>
        layer.route ? Object.keys(layer.route.methods).map((m) => `${m} ${layer.route?.path}`) : [],
      );
      expect(served.sort()).toStrictEqual(ROUTE_DOCS.map((r) => `${r.method} ${r.path}`).sort());
    } finally {
      await h.close();
    }
    const doc = buildOpenApiDocument({ info: { title: "decider", version: "0.1.0" }, routes: ROUTE_DOCS });
    expect(Object.keys(doc.paths).sort()).toStrictEqual(["/health", "/ready", "/v1/models", "/v1/systemone"]);
  });
});
