import { execFile } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import express from "express";
import { type Browser, type BrowserContext, chromium, type Page, type Response } from "playwright-core";
import type { Script } from "./fake-upstream/server";
import { type Harness, type HarnessOptions, harness, listen, waitFor } from "./helpers";

// The playground in a real browser (headless Chromium, found or fetched by the global setup), in front of the
// decider's own app and a fake model server on loopback ports. What it is served with: playground.test.ts.

const run = promisify(execFile);

// The browser's globals, which the callbacks given to page.evaluate use there. Declared here, loosely typed:
// this program's lib is Node's, and the DOM's would clash with it in src/ (fetch bodies, timers).
// biome-ignore lint/suspicious/noExplicitAny: the DOM's types are not in this program
declare const document: any, localStorage: any, sessionStorage: any, navigator: any, getComputedStyle: any, Node: any;
// biome-ignore lint/suspicious/noExplicitAny: the same
type DomElement = any;

/** Kept after the run (gitignored): screenshots, and the code samples as the page wrote them. */
const ARTIFACTS = path.join(__dirname, "..", "test-artifacts");

/** The example's three questions, with probabilities of their own (relative weights per outcome). */
const EXAMPLE_SCRIPT: Script = (q): Record<string, number> =>
  q.name === "billing"
    ? { true: 0.9, false: 0.1 }
    : q.name === "tone"
      ? { calm: 1, frustrated: 1, angry: 2 }
      : q.name === "urgency"
        ? { "0": 1, "1": 1, "2": 2 }
        : { true: 1, false: 1 };

// A browser on a machine busy with the other suites: seconds per step, not milliseconds (Playwright's own
// waits stop at 30 s each).
jest.setTimeout(60_000);

let browser: Browser;

beforeAll(async () => {
  const executablePath = process.env.CHROMIUM_PATH;
  if (executablePath === undefined || !existsSync(executablePath)) {
    throw new Error(
      `no browser at CHROMIUM_PATH=${executablePath ?? ""}: run this suite through Jest (its global setup finds one)`,
    );
  }
  browser = await chromium.launch({
    executablePath,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"],
  });
  mkdirSync(ARTIFACTS, { recursive: true });
}, 60_000);

afterAll(async () => {
  await browser?.close();
});

/** The decider (fake model server behind it) listening, and a fresh browser tab on its /playground. */
class Session {
  h!: Harness;
  url = "";
  context!: BrowserContext;
  page!: Page;
  /** Console errors (CSP violations show up here) and uncaught page errors. */
  errors: string[] = [];
  /** Requests to any other origin than the decider's. */
  foreign: string[] = [];
  private server: { url: string; close: () => Promise<void> } | undefined;

  /** `prefix`: the decider mounted under a path, as behind a proxy that strips it (`/decider/...` -> `/...`). */
  static async open(options: HarnessOptions = {}, script: Script = EXAMPLE_SCRIPT, prefix = ""): Promise<Session> {
    const s = new Session();
    s.h = await harness({ playground: true, ...options });
    s.h.fake.script = script;
    const app = prefix === "" ? s.h.app : express().use(prefix, s.h.app);
    s.server = await listen({ app, logger: s.h.logger });
    s.url = s.server.url;
    // Tall enough for the whole example: the answer column (sticky as the page scrolls) then sits at the top.
    s.context = await browser.newContext({ viewport: { width: 1360, height: 1760 } });
    s.page = await s.context.newPage();
    s.page.on("console", (msg) => {
      if (msg.type() === "error") s.errors.push(msg.text());
    });
    s.page.on("pageerror", (err) => s.errors.push(err.message));
    s.page.on("request", (req) => {
      if (!req.url().startsWith(s.url) && !req.url().startsWith("data:")) s.foreign.push(req.url());
    });
    await s.page.goto(`${s.url}${prefix}/playground`);
    return s;
  }

  private closed = false;

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.context?.close();
    await this.server?.close();
    await this.h?.close();
  }

  /** Presses Send and waits for the page to have shown what came back. */
  async send(route = "/v1/systemone"): Promise<Response> {
    const [response] = await Promise.all([
      this.page.waitForResponse((r) => new URL(r.url()).pathname === route),
      this.page.getByRole("button", { name: "Send", exact: true }).click(),
    ]);
    await this.page.locator("#result:not([aria-busy])").waitFor();
    await this.page.getByRole("button", { name: "Send", exact: true }).waitFor();
    return response;
  }

  /** Each answer card as shown: its outcomes, each bar's width as a share of its track, and what is marked. */
  async shownAnswers(): Promise<Record<string, { key: string; share: number; marked: boolean; text: string }[]>> {
    return this.page.locator("[data-answer]").evaluateAll((cards) =>
      Object.fromEntries(
        cards.map((card) => [
          (card as DomElement).dataset.answer,
          [...card.querySelectorAll("[data-outcome]")].map((row) => {
            const track = row.querySelector(".track")?.getBoundingClientRect().width ?? 0;
            const fill = row.querySelector(".fill")?.getBoundingClientRect().width ?? 0;
            return {
              key: (row as DomElement).dataset.outcome ?? "",
              share: track === 0 ? -1 : fill / track,
              marked: row.classList.contains("marked"),
              text: (row.querySelector(".outcome-value")?.textContent ?? "").trim(),
            };
          }),
        ]),
      ),
    );
  }

  async errorText(): Promise<string> {
    const box = this.page.getByRole("alert");
    await box.waitFor();
    // As rendered (the title and each line apart), which textContent would run together.
    // biome-ignore lint/performance/useDomNodeTextContent: the rendered text is what a person reads
    return (await box.innerText()).replace(/\s+/g, " ").trim();
  }

  async screenshot(name: string): Promise<void> {
    await this.page.screenshot({ path: path.join(ARTIFACTS, name), fullPage: true });
  }
}

/** Every outcome of a System One response with its probability, per question, in the response's order. */
function systemOneOutcomes(body: {
  answers: Record<string, { type: string; noul?: number; probabilities?: Record<string, number> }>;
}): Record<string, [string, number][]> {
  return Object.fromEntries(
    Object.entries(body.answers).map(([name, a]) => [
      name,
      a.type === "noul"
        ? [
            ["true", a.noul as number],
            ["false", 1 - (a.noul as number)],
          ]
        : Object.entries(a.probabilities ?? {}),
    ]),
  );
}

/** Bars as wide as the probabilities: within a pixel of a track a few hundred pixels wide. */
function expectBarsToMatch(
  shown: Record<string, { key: string; share: number }[]>,
  expected: Record<string, [string, number][]>,
): void {
  expect(Object.keys(shown)).toStrictEqual(Object.keys(expected));
  for (const [name, outcomes] of Object.entries(expected)) {
    const bars = shown[name] ?? [];
    expect({ name, keys: bars.map((b) => b.key) }).toStrictEqual({ name, keys: outcomes.map(([key]) => key) });
    outcomes.forEach(([key, p], i) => {
      const share = bars[i]?.share ?? -1;
      expect({ name, key, close: Math.abs(share - p) < 0.005 }).toStrictEqual({ name, key, close: true });
    });
  }
}

describe("the playground in Chromium, System One", () => {
  let s: Session;
  afterEach(async () => {
    await s?.close();
  });

  it("answers the example's noul, choice and score at once, each bar as wide as its probability", async () => {
    s = await Session.open();
    await s.page.locator("#model option", { hasText: "jev-latest" }).waitFor({ state: "attached" });
    const response = await s.send();
    expect(response.status()).toBe(200);
    const body = await response.json();
    const sent = JSON.parse(response.request().postData() ?? "null");
    expect(sent).toStrictEqual({
      model: "localdecider",
      state: expect.stringContaining("charged twice"),
      questions: {
        billing: { type: "noul", instructions: "Is this message about billing or payments?" },
        tone: {
          type: "choice",
          instructions: "What is the customer's tone?",
          criteria: {
            calm: "polite and patient",
            frustrated: "annoyed but civil",
            angry: "hostile, threatening or shouting",
          },
        },
        urgency: {
          type: "score",
          instructions: "How urgent is this ticket?",
          criteria: ["can wait a week", "should be handled this week", "needs an answer today"],
        },
      },
    });
    const shown = await s.shownAnswers();
    expectBarsToMatch(shown, systemOneOutcomes(body));
    // The fake's probabilities, so that the bars above are not all equal by chance.
    expectBarsToMatch(shown, {
      billing: [
        ["true", 0.9],
        ["false", 0.1],
      ],
      tone: [
        ["calm", 0.25],
        ["frustrated", 0.25],
        ["angry", 0.5],
      ],
      urgency: [
        ["0", 0.25],
        ["1", 0.25],
        ["2", 0.5],
      ],
    });
    // The choice is marked, and the score's level (1.25 rounds to level 1); the likelier of yes and no.
    expect(
      Object.fromEntries(Object.entries(shown).map(([n, bars]) => [n, bars.filter((b) => b.marked).map((b) => b.key)])),
    ).toStrictEqual({
      billing: ["true"],
      tone: ["angry"],
      urgency: ["1"],
    });
    expect(shown.tone?.map((b) => b.text)).toStrictEqual(["25.0 %", "25.0 %", "50.0 %"]);
    const status = (await s.page.locator("#status").textContent()) ?? "";
    expect(status).toMatch(/^HTTP 200 · \d+ ms · 300 input, 3 output tokens · model localdecider-0\.1\.0\/test-model$/);
    await s.page.getByRole("tab", { name: "Raw JSON" }).click();
    expect(JSON.parse((await s.page.locator("#code-json").textContent()) ?? "")).toStrictEqual(body);
    await s.page.getByRole("tab", { name: "Answers" }).click();
    await s.screenshot("playground.png");
    expect({ errors: s.errors, foreign: s.foreign }).toStrictEqual({ errors: [], foreign: [] });
  });
});

describe("the playground in Chromium, behind a proxy", () => {
  let s: Session;
  afterEach(async () => {
    await s?.close();
  });

  it("works under a path prefix the proxy strips: every URL it uses is relative to the page", async () => {
    s = await Session.open({}, EXAMPLE_SCRIPT, "/decider");
    await s.page.locator("#model option", { hasText: "jev-latest" }).waitFor({ state: "attached" });
    const response = await s.send("/decider/v1/systemone");
    expect(response.status()).toBe(200);
    expectBarsToMatch(await s.shownAnswers(), systemOneOutcomes(await response.json()));
    expect(await s.page.locator("#code-curl").textContent()).toContain(`curl -sS '${s.url}/decider/v1/systemone'`);
    expect({ errors: s.errors, foreign: s.foreign }).toStrictEqual({ errors: [], foreign: [] });
  });
});

describe("the playground in Chromium, editing the request", () => {
  let s: Session;
  afterEach(async () => {
    await s?.close();
  });

  it("adds and removes questions of each type with their criteria, takes a JSON state, and sends exactly what was written", async () => {
    s = await Session.open();
    const { page } = s;
    // Take away the example's yes/no question: its card goes, the others stay in order.
    await page.getByRole("button", { name: "Remove question billing" }).click();
    await page.getByRole("button", { name: "Add yes/no" }).click();
    const noul = page.locator(".question").nth(2);
    await expect(noul.getByLabel("Name").inputValue()).resolves.toBe("noul_1");
    // The new card's instructions have the focus: type straight away.
    await page.keyboard.type("Does the customer threaten to leave?");
    await noul.getByLabel("Yes means (optional)").fill("they say they will cancel");
    await page.getByRole("button", { name: "Add choice" }).click();
    const choice = page.locator(".question").nth(3);
    await choice.getByLabel("Name").fill("channel");
    await choice.getByLabel("Instructions").fill("Where should it go?");
    await choice.getByLabel("Option 1 label").fill("billing team");
    await choice.getByLabel("Option 2 label").fill("support");
    await choice.getByLabel("Option 2 description").fill("anything else");
    await choice.getByRole("button", { name: "Add option" }).click();
    await page.keyboard.type("nobody");
    await choice.getByRole("button", { name: "Remove option 3" }).click();
    await page.getByRole("button", { name: "Add score" }).click();
    const score = page.locator(".question").nth(4);
    await score.getByLabel("Instructions").fill("How angry?");
    await score.getByRole("button", { name: "Add level" }).click();
    await page.keyboard.type("furious");
    await score.getByRole("button", { name: "Remove level 0" }).click();
    // The tone choice loses an option too.
    await page.locator(".question").nth(0).getByRole("button", { name: "Remove option 2" }).click();
    await page.getByText("JSON", { exact: true }).click();
    await page.getByLabel("State", { exact: true }).fill('{"ticket": 4417, "text": "Charged twice!", "plan": null}');

    const response = await s.send();
    expect(response.status()).toBe(200);
    expect(JSON.parse(response.request().postData() ?? "null")).toStrictEqual({
      model: "localdecider",
      state: { ticket: 4417, text: "Charged twice!", plan: null },
      questions: {
        tone: {
          type: "choice",
          instructions: "What is the customer's tone?",
          criteria: { calm: "polite and patient", angry: "hostile, threatening or shouting" },
        },
        urgency: {
          type: "score",
          instructions: "How urgent is this ticket?",
          criteria: ["can wait a week", "should be handled this week", "needs an answer today"],
        },
        noul_1: {
          type: "noul",
          instructions: "Does the customer threaten to leave?",
          criteria: { true: "they say they will cancel" },
        },
        channel: {
          type: "choice",
          instructions: "Where should it go?",
          criteria: { "billing team": null, support: "anything else" },
        },
        score_1: { type: "score", instructions: "How angry?", criteria: ["medium", "high", "furious"] },
      },
    });
    const body = await response.json();
    expectBarsToMatch(await s.shownAnswers(), systemOneOutcomes(body));
    expect(s.errors).toStrictEqual([]);
  });

  it("refuses, before sending, what no request can hold: a state that is not JSON, two questions of one name", async () => {
    s = await Session.open();
    const { page } = s;
    let posted = 0;
    page.on("request", (req) => {
      if (req.method() === "POST") posted += 1;
    });
    await page.getByText("JSON", { exact: true }).click();
    await page.getByRole("button", { name: "Send", exact: true }).click();
    expect(await s.errorText()).toMatch(/^The state is not valid JSON \(.+\)\. Fix it, or switch the state to Text\.$/);
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("state");
    await page.getByText("Text", { exact: true }).click();
    await page.locator(".question").nth(1).getByLabel("Name").fill("billing");
    await page.getByRole("button", { name: "Send", exact: true }).click();
    expect(await s.errorText()).toBe('Two questions are named "billing": give each its own name.');
    expect(await page.locator(".question").nth(1).getByLabel("Name").getAttribute("aria-invalid")).toBe("true");
    expect(posted).toBe(0);
  });
});

describe("the playground in Chromium, with and without an API key", () => {
  let s: Session;
  afterEach(async () => {
    await s?.close();
  });

  it("without LOCALDECIDER_API_KEY, sends no key and its code samples read none", async () => {
    s = await Session.open();
    const response = await s.send();
    expect(response.status()).toBe(200);
    expect(response.request().headers().authorization).toBeUndefined();
    expect(await s.page.locator("#code-curl").textContent()).not.toContain("Authorization");
  });

  it("with LOCALDECIDER_API_KEY, says a key is needed (401), then answers with the key, which it keeps nowhere", async () => {
    const key = "s3cret-key-123";
    s = await Session.open({ apiKey: key });
    const { page } = s;
    await page.getByText("This decider needs an API key: enter it to list its models.").waitFor();
    const refused = await s.send();
    expect(refused.status()).toBe(401);
    expect(await s.errorText()).toBe(
      "This decider needs an API key. Enter it in the API key field and send again. The decider said: Missing API key (401 unauthorized).",
    );
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("api-key");
    expect(await page.getByLabel("API key").getAttribute("aria-invalid")).toBe("true");

    await page.getByLabel("API key").fill("wrong-key");
    expect((await s.send()).status()).toBe(401);
    expect(await s.errorText()).toMatch(/^The API key was not accepted\. Check it and send again\./);

    await page.getByLabel("API key").fill(key);
    const answered = await s.send();
    expect(answered.status()).toBe(200);
    expect(answered.request().headers().authorization).toBe(`Bearer ${key}`);
    expectBarsToMatch(await s.shownAnswers(), systemOneOutcomes(await answered.json()));
    // The earlier problem is gone.
    expect(await page.locator("#error").isHidden()).toBe(true);
    // The key unlocks the model list (loaded once the field is left).
    await page.locator("#model option", { hasText: "jev-latest" }).waitFor({ state: "attached" });

    // The samples send a key from the environment, never this one.
    const samples = await page.locator("#code-curl, #code-sdk, #code-openai").allTextContents();
    expect(samples[0]).toContain('-H "Authorization: Bearer $LOCALDECIDER_API_KEY"');
    expect(samples.filter((text) => text.includes(key))).toStrictEqual([]);
    // Kept in the tab's memory only: no storage, no cookie, gone on reload.
    const stored = await page.evaluate(() => ({
      local: localStorage.length,
      session: sessionStorage.length,
      cookie: document.cookie,
    }));
    expect(stored).toStrictEqual({ local: 0, session: 0, cookie: "" });
    expect(await s.context.cookies()).toStrictEqual([]);
    await page.reload();
    expect(await page.getByLabel("API key").inputValue()).toBe("");
    expect(s.errors.filter((e) => !e.includes("401"))).toStrictEqual([]);
  });
});

describe("the playground in Chromium, errors in plain words", () => {
  let s: Session;
  afterEach(async () => {
    await s?.close();
  });

  it("422: names the field the decider refused and puts the cursor in it", async () => {
    s = await Session.open();
    const instructions = s.page.locator(".question").nth(0).getByLabel("Instructions");
    await instructions.fill("   ");
    const response = await s.send();
    expect(response.status()).toBe(422);
    expect(await s.errorText()).toBe(
      'The decider refused the request (422 invalid_request). Fix this field and send again: question "billing", instructions: instructions must not be empty',
    );
    expect(await instructions.getAttribute("aria-invalid")).toBe("true");
    expect(await s.page.evaluate(() => document.activeElement?.getAttribute("data-part"))).toBe("instructions");
    expect(await s.page.locator("#status").textContent()).toMatch(/^HTTP 422 · \d+ ms · failed$/);
    expect(await contrastProblems(s.page)).toStrictEqual([]);
    await s.screenshot("playground-error.png");
  });

  it("429: says the queue is full and when to try again (Retry-After)", async () => {
    s = await Session.open({ maxInflight: 1, maxQueue: 3, questionsPerCall: 1 });
    s.h.fake.holding = true;
    // Another client's three questions fill the queue while the model server holds the first.
    const other = fetch(`${s.url}/v1/systemone`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "localdecider",
        state: "s",
        questions: Object.fromEntries(["a", "b", "c"].map((n) => [n, { type: "noul", instructions: "?" }])),
      }),
    });
    await waitFor(() => s.h.fake.inflight === 1, "the other client's first call in flight");
    const response = await s.send();
    expect(response.status()).toBe(429);
    const after = (await response.allHeaders())["retry-after"];
    expect(after).toMatch(/^[1-9]\d*$/);
    const seconds = after === "1" ? "1 second" : `${after} seconds`;
    expect(await s.errorText()).toBe(
      `The decider is busy: its queue is full. Try again in ${seconds}. The decider said: too many decisions queued; retry in ${after} s (429 queue_full).`,
    );
    s.h.fake.release();
    expect((await other).status).toBe(200);
  });

  it("503: shows what /ready says about the model", async () => {
    s = await Session.open({ upstreamModel: "missing-model" });
    const response = await s.send();
    expect(response.status()).toBe(503);
    const ready = await fetch(`${s.url}/ready`);
    const reason = ((await ready.json()) as { error: string }).error;
    expect({ status: ready.status, reason }).toStrictEqual({
      status: 503,
      reason: expect.stringContaining('"missing-model"'),
    });
    expect(await s.errorText()).toBe(
      `The model is not ready. /ready says: ${reason} The decider said: ${((await response.json()) as { error: string }).error} (503 model_unavailable).`,
    );
  });
});

describe("the playground in Chromium, OpenAI Decisions", () => {
  let s: Session;
  afterEach(async () => {
    await s?.close();
  });

  /** An answer in the documented shapes (the shared DECISIONS.md, and docs/decisions.md): answers in question order. */
  const decision = {
    model: "localdecider",
    answers: [
      { type: "predicate", name: "billing", probability: 0.8 },
      {
        type: "choice",
        name: "tone",
        choice: "frustrated",
        probabilities: [
          { value: "calm", probability: 0.1 },
          { value: "frustrated", probability: 0.6 },
          { value: "angry", probability: 0.3 },
        ],
        confidence: 0.4,
      },
      {
        type: "score",
        name: "urgency",
        score: 1.7,
        probabilities: [
          { value: 0, label: "can wait a week", probability: 0.1 },
          { value: 1, label: "should be handled this week", probability: 0.1 },
          { value: 2, label: "needs an answer today", probability: 0.8 },
        ],
        confidence: 0.6,
      },
    ],
    usage: {
      input_tokens: 120,
      input_tokens_details: { cache_write_tokens: 0, cached_tokens: 0 },
      output_tokens: 3,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 123,
    },
  };

  it("sends the questions as a Decisions request, shows its answers as bars, and writes the same request for openai", async () => {
    s = await Session.open();
    const { page } = s;
    const sent: unknown[] = [];
    // The route is another branch's: the browser answers it here, as documented.
    await page.route("**/v1/decisions", async (route) => {
      sent.push(route.request().postDataJSON());
      await route.fulfill({ status: 200, contentType: "application/json", body: JSON.stringify(decision) });
    });
    await page.getByText("OpenAI Decisions").click();
    await page.locator(".question").nth(0).getByLabel("No means (optional)").fill("anything else");
    const response = await s.send("/v1/decisions");
    expect(response.status()).toBe(200);
    const expected = {
      model: "localdecider",
      input: expect.stringContaining("charged twice"),
      questions: [
        {
          type: "predicate",
          name: "billing",
          instructions: "Is this message about billing or payments?\nFalse means: anything else",
        },
        {
          type: "choice",
          name: "tone",
          instructions: "What is the customer's tone?",
          choices: [
            { value: "calm", description: "polite and patient" },
            { value: "frustrated", description: "annoyed but civil" },
            { value: "angry", description: "hostile, threatening or shouting" },
          ],
        },
        {
          type: "score",
          name: "urgency",
          instructions: "How urgent is this ticket?",
          levels: [
            { label: "can wait a week" },
            { label: "should be handled this week" },
            { label: "needs an answer today" },
          ],
        },
      ],
    };
    expect(sent).toStrictEqual([expected]);
    const shown = await s.shownAnswers();
    expectBarsToMatch(shown, {
      billing: [
        ["true", 0.8],
        ["false", 0.2],
      ],
      tone: [
        ["calm", 0.1],
        ["frustrated", 0.6],
        ["angry", 0.3],
      ],
      urgency: [
        ["0", 0.1],
        ["1", 0.1],
        ["2", 0.8],
      ],
    });
    expect(
      Object.fromEntries(Object.entries(shown).map(([n, bars]) => [n, bars.filter((b) => b.marked).map((b) => b.key)])),
    ).toStrictEqual({
      billing: ["true"],
      tone: ["frustrated"],
      urgency: ["2"],
    });
    expect(await page.locator("#status").textContent()).toMatch(
      /^HTTP 200 · \d+ ms · 120 input, 3 output, 123 total tokens · model localdecider$/,
    );

    // The curl sample posts the same body to /v1/decisions; the openai sample passes it to decisions.create.
    const curl = parseCurl((await page.locator("#code-curl").textContent()) ?? "");
    expect({ url: curl.url, body: curl.body }).toStrictEqual({ url: `${s.url}/v1/decisions`, body: expected });
    const openai = (await page.locator("#code-openai").textContent()) ?? "";
    expect(openai).toContain(`baseURL: "${s.url}/v1"`);
    const created = /client\.decisions\.create\(([\s\S]*)\);\n/.exec(openai)?.[1] ?? "";
    expect(JSON.parse(created)).toStrictEqual(expected);
    const file = path.join(ARTIFACTS, "openai-sample.mjs");
    writeFileSync(file, openai);
    await run(process.execPath, ["--check", file]);

    // A JSON object as the state becomes an input_json part of a user message.
    await page.getByText("JSON", { exact: true }).click();
    await page.getByLabel("State", { exact: true }).fill('{"ticket": 4417}');
    const json = parseCurl((await page.locator("#code-curl").textContent()) ?? "").body as { input: unknown };
    expect(json.input).toStrictEqual([{ role: "user", content: [{ type: "input_json", data: { ticket: 4417 } }] }]);
    expect(s.errors).toStrictEqual([]);
  });
});

describe("the playground in Chromium, code samples", () => {
  let s: Session;
  afterEach(async () => {
    await s?.close();
  });

  it("writes curl and @typesafe-ai/sdk code that, run, gets the answers the page showed; Copy copies it", async () => {
    const key = "sample-key";
    s = await Session.open({ apiKey: key });
    const { page } = s;
    await page.getByLabel("API key").fill(key);
    const response = await s.send();
    const answers = ((await response.json()) as { answers: unknown }).answers;

    const curlText = (await page.locator("#code-curl").textContent()) ?? "";
    await run("sh", ["-n", "-c", curlText]);
    const curl = parseCurl(curlText);
    expect(curl.url).toBe(`${s.url}/v1/systemone`);
    const replayed = await fetch(curl.url, {
      method: "POST",
      headers: Object.fromEntries(
        curl.headers.map(([name, value]) => [name, value.replace("$LOCALDECIDER_API_KEY", key)]),
      ),
      body: JSON.stringify(curl.body),
    });
    expect(((await replayed.json()) as { answers: unknown }).answers).toStrictEqual(answers);

    const sdk = (await page.locator("#code-sdk").textContent()) ?? "";
    const file = path.join(ARTIFACTS, "sdk-sample.mjs");
    writeFileSync(file, sdk);
    const { stdout } = await run(process.execPath, [file], {
      env: { PATH: process.env.PATH, LOCALDECIDER_API_KEY: key },
      cwd: ARTIFACTS,
    });
    expect(JSON.parse(stdout)).toStrictEqual(answers);

    await s.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: s.url });
    await page.getByRole("tab", { name: "curl" }).click();
    await page.locator("#panel-curl").getByRole("button", { name: "Copy" }).click();
    await page.locator("#copy-status", { hasText: "Copied" }).waitFor({ state: "attached" });
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(curlText);
  });
});

describe("the playground in Chromium, accessibility", () => {
  let s: Session;
  afterEach(async () => {
    await s?.close();
  });

  it("labels every control, reaches each one with Tab, and sends with Ctrl+Enter", async () => {
    s = await Session.open();
    const { page } = s;
    const unlabelled = await page.evaluate(() => {
      const name = (el: DomElement): string => {
        const aria = el.getAttribute("aria-label");
        if (aria) return aria;
        const by = el.getAttribute("aria-labelledby");
        if (by)
          return by
            .split(" ")
            .map((id: string) => document.getElementById(id)?.textContent ?? "")
            .join(" ");
        const labels = el.labels;
        if (labels && labels.length > 0) return [...labels].map((l) => l.textContent).join(" ");
        return el.tagName === "BUTTON" || el.tagName === "A" ? (el.textContent ?? "") : "";
      };
      return [...document.querySelectorAll("input, select, textarea, button, a[href], [role=tabpanel]")]
        .filter((el) => name(el).trim() === "")
        .map((el) => el.outerHTML.slice(0, 120));
    });
    expect(unlabelled).toStrictEqual([]);

    // Every control that Tab should reach (one radio per group, the selected tab), numbered in the page.
    const expected = await page.evaluate(() => {
      const controls = [
        ...document.querySelectorAll(
          'a[href], button:not([tabindex="-1"]), input:not([type=radio]), input[type=radio]:checked, select, textarea, [tabindex="0"]',
        ),
      ].filter((el) => !el.closest("[hidden]"));
      controls.forEach((el, i) => {
        el.dataset.kb = String(i);
      });
      return controls.map((el) => el.dataset.kb);
    });
    const reached = new Set<string>();
    for (let i = 0; i < 200 && reached.size < expected.length; i++) {
      await page.keyboard.press("Tab");
      const at = await page.evaluate(() => document.activeElement?.dataset.kb);
      if (at !== undefined) reached.add(at);
    }
    expect(expected.filter((kb) => !reached.has(kb as string))).toStrictEqual([]);

    // Arrow keys move between the views (one tab stop for the tab list) and switch the dialect.
    await page.getByRole("tab", { name: "Answers" }).focus();
    await page.keyboard.press("ArrowRight");
    expect(await page.getByRole("tab", { name: "Raw JSON" }).getAttribute("aria-selected")).toBe("true");
    expect(await page.locator("#panel-json").isVisible()).toBe(true);
    await page.keyboard.press("End");
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("tab-openai");
    await page.getByRole("radio", { name: /^System One/ }).focus();
    await page.keyboard.press("ArrowRight");
    expect(await page.getByRole("radio", { name: /^OpenAI Decisions/ }).isChecked()).toBe(true);
    await page.keyboard.press("ArrowLeft");

    await page.getByLabel("State", { exact: true }).focus();
    const [response] = await Promise.all([
      page.waitForResponse((r) => new URL(r.url()).pathname === "/v1/systemone"),
      page.keyboard.press("Control+Enter"),
    ]);
    expect(response.status()).toBe(200);
    await page.locator("[data-answer=billing]").waitFor();
  });

  it("passes WCAG AA contrast: text 4.5:1 (large 3:1), bars and field borders 3:1", async () => {
    s = await Session.open();
    await s.send();
    expect(await contrastProblems(s.page)).toStrictEqual([]);
  });

  it("computes contrast as WCAG does (the check can fail)", () => {
    expect(contrast("#000000", "#ffffff")).toBeCloseTo(21, 6);
    expect(contrast("#777777", "#ffffff")).toBeLessThan(4.5);
    expect(contrast("#767676", "#ffffff")).toBeGreaterThanOrEqual(4.5);
    expect(contrast("rgb(255, 255, 255)", "rgb(29, 78, 216)")).toBeCloseTo(6.7, 1);
  });
});

// ---- helpers -----------------------------------------------------------------------------------------------

/** The curl sample read back: URL, headers and the JSON of its quoted heredoc. */
function parseCurl(text: string): { url: string; headers: [string, string][]; body: unknown } {
  const lines = text.split("\n");
  const url = /^curl -sS '([^']+)' \\$/.exec(lines[0] ?? "")?.[1];
  const headers: [string, string][] = [];
  let i = 1;
  for (; i < lines.length; i++) {
    const header = /^ {2}-H (?:'([^']*)'|"([^"]*)") \\$/.exec(lines[i] ?? "");
    if (header === null) break;
    const [name, value] = (header[1] ?? header[2] ?? "").split(/: (.*)/s);
    headers.push([name ?? "", value ?? ""]);
  }
  if (url === undefined || lines[i] !== "  --data-binary @- <<'JSON'" || lines.at(-1) !== "JSON") {
    throw new Error(`not the curl sample's shape:\n${text}`);
  }
  return { url, headers, body: JSON.parse(lines.slice(i + 1, -1).join("\n")) };
}

function channels(color: string): [number, number, number] {
  const hex = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(color);
  if (hex) return [1, 2, 3].map((k) => Number.parseInt(hex[k] as string, 16)) as [number, number, number];
  const rgb = /^rgba?\((\d+(?:\.\d+)?), (\d+(?:\.\d+)?), (\d+(?:\.\d+)?)(?:, ([\d.]+))?\)$/.exec(color);
  if (rgb === null) throw new Error(`not a colour: ${color}`);
  if (rgb[4] !== undefined && Number(rgb[4]) < 1) throw new Error(`a translucent colour: ${color}`);
  return [Number(rgb[1]), Number(rgb[2]), Number(rgb[3])];
}

/** WCAG 2's contrast ratio of two opaque colours (relative luminance of sRGB). */
function contrast(a: string, b: string): number {
  const luminance = (color: string) => {
    const [r, g, bl] = channels(color).map((c) => {
      const v = c / 255;
      return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    }) as [number, number, number];
    return 0.2126 * r + 0.7152 * g + 0.0722 * bl;
  };
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x) as [number, number];
  return (hi + 0.05) / (lo + 0.05);
}

/**
 * Every visible piece of text (and each field's value and placeholder) against the first opaque background
 * behind it, each bar against its track and each field's border against its background, as rendered: the pairs
 * under WCAG AA's ratio.
 */
async function contrastProblems(page: Page): Promise<string[]> {
  const pairs = await page.evaluate(() => {
    const found: { what: string; fg: string; bg: string; min: number }[] = [];
    const backgroundOf = (el: DomElement): string => {
      for (let e = el; e !== null; e = e.parentElement) {
        const bg = getComputedStyle(e).backgroundColor;
        if (bg !== "rgba(0, 0, 0, 0)" && bg !== "transparent") return bg;
      }
      return "rgb(255, 255, 255)";
    };
    const visible = (el: DomElement) => {
      const box = el.getBoundingClientRect();
      return box.width > 1 && box.height > 1 && getComputedStyle(el).visibility !== "hidden";
    };
    const describe = (el: DomElement) =>
      `${el.tagName.toLowerCase()}${el.id ? `#${el.id}` : ""}.${el.className} "${(el.textContent ?? "").trim().slice(0, 30)}"`;
    for (const el of document.querySelectorAll("body *")) {
      if (!visible(el)) continue;
      const style = getComputedStyle(el);
      const size = Number.parseFloat(style.fontSize);
      const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
      const hasText = [...el.childNodes].some(
        (n) => n.nodeType === Node.TEXT_NODE && (n.textContent ?? "").trim() !== "",
      );
      const field = el.matches("input:not([type=radio]), textarea, select");
      if (hasText || field)
        found.push({ what: describe(el), fg: style.color, bg: backgroundOf(el), min: large ? 3 : 4.5 });
      if (field) {
        found.push({
          what: `border of ${describe(el)}`,
          fg: style.borderTopColor,
          bg: backgroundOf(el.parentElement),
          min: 3,
        });
        if (el.hasAttribute("placeholder")) {
          found.push({
            what: `placeholder of ${describe(el)}`,
            fg: getComputedStyle(el, "::placeholder").color,
            bg: backgroundOf(el),
            min: 4.5,
          });
        }
      }
      if (el.matches(".fill") && el.getBoundingClientRect().width > 1) {
        found.push({
          what: `bar ${describe(el.closest("[data-outcome]"))}`,
          fg: style.backgroundColor,
          bg: backgroundOf(el.parentElement),
          min: 3,
        });
      }
    }
    return found;
  });
  expect(pairs.length).toBeGreaterThan(50);
  return pairs
    .map((p) => ({ ...p, ratio: contrast(p.fg, p.bg) }))
    .filter((p) => p.ratio < p.min)
    .map((p) => `${p.what}: ${p.fg} on ${p.bg} is ${p.ratio.toFixed(2)}:1, under ${p.min}:1`);
}
