import { readFileSync } from "node:fs";
import path from "node:path";
import { loadConfig } from "@localdecider/service-kit";
import request from "supertest";
import { HOST_NOT_ALLOWED_MESSAGE } from "../src/app";
import { configSchema, isLoopbackHost, playgroundEnabled } from "../src/config";
import { PLAYGROUND_CSP, PLAYGROUND_DIR } from "../src/playground";
import { type Harness, harness } from "./helpers";
import { processesInFrontOfFake } from "./shared/processes";

// What the page is served with. Its behaviour in a browser: playground.browser.test.ts.

const NOT_FOUND = { error: "Not found", code: "not_found" };
const read = (file: string) => readFileSync(path.join(PLAYGROUND_DIR, file), "utf8");

describe("GET /playground when on", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness({ playground: true });
  });
  afterAll(async () => {
    await h.close();
  });

  it("serves the page, its stylesheet and its script, each under a policy that runs nothing inline and loads nothing from elsewhere", async () => {
    for (const [url, type, file] of [
      ["/playground", "text/html; charset=utf-8", "index.html"],
      ["/playground/playground.css", "text/css; charset=utf-8", "playground.css"],
      ["/playground/playground.js", "text/javascript; charset=utf-8", "playground.js"],
    ] as const) {
      const res = await request(h.app).get(url);
      expect({
        url,
        status: res.status,
        type: res.headers["content-type"],
        same: res.text === read(file),
      }).toStrictEqual({ url, status: 200, type, same: true });
      expect(res.headers["content-security-policy"]).toBe(PLAYGROUND_CSP);
      expect(res.headers["x-content-type-options"]).toBe("nosniff");
      expect(res.headers["referrer-policy"]).toBe("no-referrer");
    }
    const policy = Object.fromEntries(
      PLAYGROUND_CSP.split("; ").map((directive) => {
        const [name, ...values] = directive.split(" ");
        return [name, values];
      }),
    );
    expect(policy["default-src"]).toStrictEqual(["'self'"]);
    expect(policy["script-src"]).toStrictEqual(["'self'"]);
    expect(policy["style-src"]).toStrictEqual(["'self'"]);
    expect(policy["connect-src"]).toStrictEqual(["'self'"]);
    expect(policy["frame-ancestors"]).toStrictEqual(["'none'"]);
    expect(PLAYGROUND_CSP).not.toMatch(/unsafe|https?:|\*/);
  });

  it("sends /playground/ to ../playground (its relative URLs would shift a level) and anything else under it to the 404", async () => {
    const slash = await request(h.app).get("/playground/");
    expect({ status: slash.status, location: slash.headers.location }).toStrictEqual({
      status: 301,
      location: "../playground",
    });
    for (const url of ["/playground/index.html", "/playground/..%2Fpackage.json", "/playground/x.js", "/Playground"]) {
      const res = await request(h.app).get(url);
      expect({ url, status: res.status, body: res.body }).toStrictEqual({ url, status: 404, body: NOT_FOUND });
    }
  });

  it("refuses a page on a rebound DNS name with 421, as the API does", async () => {
    for (const url of ["/playground", "/playground/playground.js"]) {
      const res = await request(h.app).get(url).set("Host", "rebind.attacker.example");
      expect({ url, status: res.status, body: res.body }).toStrictEqual({
        url,
        status: 421,
        body: { error: HOST_NOT_ALLOWED_MESSAGE, code: "host_not_allowed" },
      });
    }
    await request(h.app).get("/playground").set("Host", "localhost:8080").expect(200);
  });
});

describe("GET /playground when off", () => {
  it("is a 404 like any unknown path, assets included", async () => {
    const h = await harness({ playground: false });
    try {
      for (const url of ["/playground", "/playground/", "/playground/playground.js", "/playground/playground.css"]) {
        const res = await request(h.app).get(url);
        expect({ url, status: res.status, body: res.body }).toStrictEqual({ url, status: 404, body: NOT_FOUND });
      }
    } finally {
      await h.close();
    }
  });
});

describe("the page's files", () => {
  const html = read("index.html");
  const script = read("playground.js");

  it("hold no inline script, style or event handler (the policy would block them), and load only their own two files", () => {
    const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts.map(([, attrs, body]) => ({ attrs: attrs?.trim(), body }))).toStrictEqual([
      { attrs: 'src="playground/playground.js" defer', body: "" },
    ]);
    expect(html).not.toMatch(/<style\b|\sstyle=|\son[a-z]+=|javascript:/i);
    const loaded = [...html.matchAll(/\s(?:src|href)="([^"]*)"/g)].map(([, url]) => url);
    expect(loaded).toStrictEqual([
      "data:,",
      "playground/playground.css",
      "playground/playground.js",
      "#request",
      "docs",
      "openapi.json",
    ]);
  });

  it("never turn text into markup, never run text as code, and never store the API key", () => {
    expect(script).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/);
    expect(script).not.toMatch(/\b(localStorage|sessionStorage|indexedDB)\s*[.[]|document\.cookie/);
  });
});

describe("the page's files in the package and the images", () => {
  it("are deployed with the package (pnpm deploy copies what a pack holds) and copied into both Docker images", () => {
    const root = path.join(__dirname, "..");
    const manifest = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as { files?: string[] };
    // No `files` list: a pack holds every file of the package; with one, it must name the folder.
    expect(manifest.files === undefined || manifest.files.includes("playground")).toBe(true);
    expect(path.relative(root, PLAYGROUND_DIR)).toBe("playground");
    const dockerfile = readFileSync(path.join(root, "Dockerfile"), "utf8");
    const stages = Object.fromEntries(
      dockerfile.split(/^(?=FROM )/m).map((stage) => [/^FROM \S+ AS (\S+)/.exec(stage)?.[1] ?? "", stage] as const),
    );
    for (const image of ["embedded", "runtime"]) {
      const copies = /^COPY --from=\S+ \/out\/playground \.\/playground$/m.test(stages[image] ?? "");
      expect({ image, copies }).toStrictEqual({ image, copies: true });
    }
  });
});

describe("LOCALDECIDER_PLAYGROUND", () => {
  const enabled = (env: Record<string, string>) => playgroundEnabled(loadConfig(configSchema, env));

  it("is on by default only where the service listens on loopback", () => {
    const hosts = ["127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]", "0.0.0.0", "::", "10.0.0.5", "decider"];
    expect(hosts.map((host) => [host, enabled({ LOCALDECIDER_HOST: host })])).toStrictEqual([
      ["127.0.0.1", true],
      ["127.1.2.3", true],
      ["localhost", true],
      ["::1", true],
      ["[::1]", true],
      ["0.0.0.0", false],
      ["::", false],
      ["10.0.0.5", false],
      ["decider", false],
    ]);
    expect(enabled({})).toBe(true);
    expect(isLoopbackHost("127.0.0.1.example.com")).toBe(false);
  });

  it("turns it on or off whatever the address when set", () => {
    expect(enabled({ LOCALDECIDER_HOST: "0.0.0.0", LOCALDECIDER_PLAYGROUND: "true" })).toBe(true);
    expect(enabled({ LOCALDECIDER_HOST: "127.0.0.1", LOCALDECIDER_PLAYGROUND: "false" })).toBe(false);
  });
});

describe("the built service process", () => {
  const start = processesInFrontOfFake();

  // The rule itself is playgroundEnabled's (above); here, that main.ts applies it. Two processes: a few
  // seconds each to start on a busy machine.
  it("serves the playground on loopback and not on every interface, and says which at start", async () => {
    const started = await Promise.all([start({}), start({ LOCALDECIDER_HOST: "0.0.0.0" })]);
    const seen = [];
    for (const decider of started) {
      const res = await request(decider.url).get("/playground");
      const said = decider.lines.find((l) => l.message === "decider listening")?.playground;
      seen.push([res.status, said]);
    }
    expect(seen).toStrictEqual([
      [200, "/playground"],
      [404, "off"],
    ]);
  }, 30_000);
});
