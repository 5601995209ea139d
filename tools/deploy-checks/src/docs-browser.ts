import { existsSync } from "node:fs";
import { type Browser, chromium } from "playwright-core";

const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

/**
 * Starts the browser at CHROMIUM_PATH, which the suite's global setup sets to the one it found or fetched
 * (@localdecider/test-env/chromium: the machine's, or the npm fallback).
 */
export async function launchChromium(): Promise<Browser> {
  const executablePath = process.env.CHROMIUM_PATH;
  if (!executablePath || !existsSync(executablePath)) {
    throw new Error(
      `no browser at CHROMIUM_PATH=${executablePath ?? ""}: run this suite through Jest (its global setup finds one)`,
    );
  }
  return chromium.launch({ executablePath, args: CHROMIUM_ARGS, headless: true });
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
