import path from "node:path";
import { type Response, Router } from "express";

/**
 * The decision playground's files: plain HTML, CSS and one script, served as written (no build step, nothing
 * from a CDN). They live beside dist/ and src/ in the package (both resolve `../playground`), and the Docker
 * image copies the folder (services/decider/Dockerfile).
 */
export const PLAYGROUND_DIR = path.join(__dirname, "..", "playground");

/** Every file the page loads; anything else under /playground/ falls through to the 404. */
const ASSETS: Record<string, string> = { "playground.js": "js", "playground.css": "css" };

/**
 * Everything the page loads and calls is on this origin, and no script or style is inline: an injected tag
 * or attribute does not run, and the page cannot send what it holds (the API key) anywhere else. The bars'
 * widths are set through the CSSOM (`element.style.width`), which a policy without 'unsafe-inline' allows.
 * The favicon is an empty data: URL (no request, no 404 in the console).
 */
export const PLAYGROUND_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

function secureHeaders(res: Response): void {
  res.setHeader("Content-Security-Policy", PLAYGROUND_CSP);
  res.setHeader("X-Content-Type-Options", "nosniff");
  res.setHeader("Referrer-Policy", "no-referrer");
  // Revalidated on each load, so a new version of the service never runs with an old script.
  res.setHeader("Cache-Control", "no-cache");
}

/**
 * GET /playground and its two assets. Mounted after the Host check, so a page on a rebound DNS name gets the
 * same 421 as the API. The page's URLs are relative to it (`playground/playground.js`, `v1/systemone`), so it
 * works wherever the service is mounted, behind a proxy that strips a path prefix too.
 */
export function playgroundRouter(): Router {
  const router = Router({ caseSensitive: true, strict: true });
  router.get("/playground", (_req, res) => {
    secureHeaders(res);
    res.sendFile("index.html", { root: PLAYGROUND_DIR });
  });
  // `/playground/` would shift every relative URL one level down: sent to `../playground`, as /docs/ is.
  router.get("/playground/", (_req, res) => {
    res.redirect(301, "../playground");
  });
  router.get("/playground/:file", (req, res, next) => {
    const file = req.params.file;
    if (!Object.hasOwn(ASSETS, file)) {
      next();
      return;
    }
    secureHeaders(res);
    res.type(ASSETS[file] as string);
    res.sendFile(file, { root: PLAYGROUND_DIR });
  });
  return router;
}
