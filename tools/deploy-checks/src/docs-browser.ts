import { existsSync } from "node:fs";
import { type Browser, chromium } from "playwright-core";

/** Debian's chromium (installed by .ci/run); CI on GitHub points CHROMIUM_PATH at the runner's Chrome. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(`no browser at ${CHROMIUM_PATH}: run .ci/run (installs Debian's chromium) or set CHROMIUM_PATH`);
  }
  return chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS, headless: true });
}

export interface RenderedDocs {
  title: string;
  /** [method, path, summary] of each operation Swagger UI rendered, in page order. */
  operations: string[][];
  /** Requests to anything but the page's own origin (a CDN, an online validator, ...). */
  foreignRequests: string[];
  /** Uncaught page errors and console errors (CSP violations show up here). */
  errors: string[];
}

/**
 * Opens a service's `/docs` and reads what Swagger UI rendered once `expectedOperations` operations are on
 * the page. Reusable for the real services: start the app on a loopback port and pass `${base}/docs`.
 */
export async function renderDocs(browser: Browser, docsUrl: string, expectedOperations: number): Promise<RenderedDocs> {
  const origin = new URL(docsUrl).origin;
  const page = await browser.newPage();
  const foreignRequests: string[] = [];
  const errors: string[] = [];
  page.on("request", (req) => {
    const url = req.url();
    if (new URL(url).origin !== origin && !url.startsWith("data:")) foreignRequests.push(url);
  });
  page.on("pageerror", (err) => errors.push(err.message));
  page.on("console", (msg) => {
    if (msg.type() === "error") errors.push(msg.text());
  });
  try {
    await page.goto(docsUrl);
    await page
      .locator(".opblock")
      .nth(expectedOperations - 1)
      .waitFor({ timeout: 30_000 });
    const operations = await page
      .locator(".opblock")
      .evaluateAll((blocks) =>
        blocks.map((block) =>
          [".opblock-summary-method", ".opblock-summary-path", ".opblock-summary-description"].map((part) =>
            (block.querySelector(part)?.textContent ?? "").trim(),
          ),
        ),
      );
    const title = ((await page.locator(".info .title").textContent()) ?? "").trim();
    return { title, operations, foreignRequests, errors };
  } finally {
    await page.close();
  }
}
