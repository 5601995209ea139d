import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { basicAuthOf } from "../upstream/address";

/** The default model: see the decider README ("Embedded engine") for why, its size and licence. */
export const DEFAULT_MODEL = "hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF/qwen2.5-1.5b-instruct-q4_k_m.gguf";

/** Where LOCALDECIDER_MODEL points: a GGUF file on disk, or one to download (an http(s) URL or an hf: URI). */
export type ModelSource =
  | { kind: "file"; path: string }
  /** LOCALDECIDER_MODEL=demo: a tiny model with random weights, written at start (demo/demo-model.ts). */
  | { kind: "demo" }
  | {
      kind: "download";
      /**
       * For logs, /ready, /v1/models and errors: an hf: URI as written; a URL as its scheme, host and path only
       * (no credentials, no query, no fragment: a signed URL's query is a secret, `?X-Amz-Signature=…`).
       */
      uri: string;
      /** What is fetched, never with credentials: fetch refuses them, and its errors would quote them. */
      url: string;
      /**
       * How the files beside the model (its record, its part's metadata) name its source: `url`, with a query
       * replaced by its SHA-256 (`?sha256=<hex>`), so that no signature is written to disk either.
       */
      recorded: string;
      /** `Basic …` made of the URL's credentials, when it had any: sent to the URL's own origin only. */
      authorization?: string;
      /**
       * Relative path under LOCALDECIDER_MODELS_DIR: the URL's host and path, and a folder named by the hash of
       * its query when it has one (`m.gguf?v=1` and `m.gguf?v=2` are two files).
       */
      cachePath: string;
    };

const HF = /^hf:([^/#]+)\/([^/#]+)\/([^#]+\.gguf)(?:#(.*))?$/i;
/** A user, repository or branch part: what Hugging Face and git allow, and never a `..` that climbs out. */
const NAME = /^(?!.*\.\.)[A-Za-z0-9_][\w.-]*$/;
/** A segment of the file's path in the repository: no `.`/`..`, no percent-escapes, separators or `?#:`. */
const FILE_SEGMENT = /^(?!\.\.?$)[^\\/%?#:\s]+$/;

/** Hugging Face's own address: where hf: URIs are fetched from unless HF_ENDPOINT names a mirror. */
export const HF_DEFAULT_ENDPOINT = "https://huggingface.co";

/**
 * Parses LOCALDECIDER_MODEL. An hf: URI names one file, `hf:<user>/<repo>/<file>.gguf[#<branch>]`; the
 * `hf:<user>/<repo>:<quant>` form that node-llama-cpp also reads is not taken, since finding its file needs
 * a search we would then have to trust blindly. Throws with a message for the boot error; the message never
 * quotes the URL's credentials. From `env`, as huggingface_hub reads them: HF_ENDPOINT, a mirror hf: URIs are
 * fetched from instead of huggingface.co, and HF_TOKEN, sent as a bearer to that address only.
 */
export function parseModelSource(
  value: string,
  cwd = process.cwd(),
  env: NodeJS.ProcessEnv = process.env,
): ModelSource {
  // A file of that name is `./demo`.
  if (value === "demo") return { kind: "demo" };
  if (value.startsWith("hf:")) return parseHf(value, hubOf(env));
  if (/^https?:\/\//i.test(value)) {
    if (!URL.canParse(value)) throw new Error(`"${shownUnparsed(value)}" is not a valid URL`);
    const url = new URL(value);
    const withCredentials = new URL(url);
    url.username = "";
    url.password = "";
    const shown = shownUrl(url);
    // Escapes are decoded for the cache path and the credentials: a malformed one is refused here, not a URIError later.
    if (/%(?![0-9a-f]{2})/i.test(value)) {
      throw new Error(`"${shown}" has a malformed percent-escape: "%" must be followed by two hexadecimal digits`);
    }
    const authorization = basicAuthOf(withCredentials);
    if (path.posix.basename(url.pathname) === "") throw new Error(`"${shown}" names no file`);
    return {
      kind: "download",
      uri: shown,
      url: url.toString(),
      recorded: url.search === "" ? url.toString() : `${shown}?sha256=${sha256Hex(url.search)}`,
      ...(authorization === undefined ? {} : { authorization }),
      cachePath: cachePathOf(url),
    };
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) {
    throw new Error(`"${shownUnparsed(value)}": only a file path, an http(s) URL or an hf: URI can be loaded`);
  }
  return { kind: "file", path: path.resolve(cwd, value) };
}

/**
 * `hf:<user>/<repo>/<file>.gguf[#<branch>]` as the hub's download URL. Every part is checked, so that the URI
 * can only name a file of that repository: no `..`, no percent-escapes (`%2F`), no `:`. A branch may have
 * `/` between plain parts (`refs/pr/1`): it is sent as `%2F`, which the hub reads as one revision.
 */
function parseHf(value: string, hub: Hub): ModelSource {
  const m = HF.exec(value);
  if (m === null) {
    throw new Error(
      `"${value}" is not an hf: URI of one file: write hf:<user>/<repo>/<file>.gguf (optionally #<branch>)`,
    );
  }
  const [, user, repo, file, branch] = m as unknown as [string, string, string, string, string | undefined];
  if (!NAME.test(user) || !NAME.test(repo)) {
    throw new Error(`"${value}": the user and repository must be plain names (letters, digits, "_", "-", ".")`);
  }
  const segments = file.split("/");
  if (!segments.every((s) => FILE_SEGMENT.test(s))) {
    throw new Error(`"${value}": the file's path may not have empty, "." or ".." parts, "%", "\\", "?", ":" or spaces`);
  }
  const refParts = (branch ?? "main").split("/");
  if (!refParts.every((p) => NAME.test(p))) {
    throw new Error(
      `"${value}": the branch must be a plain ref name (letters, digits, "_", "-", "." and "/" between parts; no "..", "%" or ":")`,
    );
  }
  const url = new URL(
    `${hub.endpoint}/${user}/${repo}/resolve/${refParts.join("%2F")}/${segments.map(encodeURIComponent).join("/")}`,
  );
  return {
    kind: "download",
    uri: value,
    url: url.toString(),
    recorded: url.toString(),
    ...(hub.token === undefined ? {} : { authorization: `Bearer ${hub.token}` }),
    cachePath: cachePathOf(url),
  };
}

interface Hub {
  /** Without a trailing slash; may have a path (a mirror under a prefix). */
  endpoint: string;
  token?: string;
}

/** HF_ENDPOINT and HF_TOKEN, checked: a bad endpoint stops the boot naming the variable. */
function hubOf(env: NodeJS.ProcessEnv): Hub {
  const configured = env.HF_ENDPOINT ?? "";
  const token = env.HF_TOKEN ?? "";
  let endpoint = HF_DEFAULT_ENDPOINT;
  if (configured !== "") {
    const url = URL.canParse(configured) ? new URL(configured) : undefined;
    if (url === undefined || !/^https?:$/.test(url.protocol) || url.username !== "" || url.password !== "") {
      throw new Error(
        `HF_ENDPOINT "${shownUnparsed(configured)}" must be an http(s) URL without credentials (a Hugging Face mirror, e.g. https://hf-mirror.example); HF_TOKEN is its token`,
      );
    }
    if (url.search !== "" || url.hash !== "") throw new Error("HF_ENDPOINT must have no query or fragment");
    endpoint = `${url.origin}${url.pathname.replace(/\/+$/, "")}`;
  }
  if (token !== "" && !/^[\x21-\x7e]+$/.test(token)) {
    throw new Error("HF_TOKEN holds characters a token cannot have (spaces, line breaks or non-ASCII)");
  }
  return { endpoint, ...(token === "" ? {} : { token }) };
}

/**
 * `user/repo[:quant]` written where a file path was expected: llama-server's `-hf` shorthand. A suggestion
 * for the boot error (the file's name is a guess from Qwen's own naming; the hub's listing has the real one).
 */
export function hfShorthandHint(value: string): string | undefined {
  const m = /^([A-Za-z0-9_][\w.-]*)\/([A-Za-z0-9_][\w.-]*?)(?::([\w.-]+))?$/.exec(value);
  if (m === null || /\.gguf$/i.test(value)) return undefined;
  const [, user, repo, quant] = m as unknown as [string, string, string, string | undefined];
  const base = repo.replace(/-GGUF$/i, "").toLowerCase();
  const guess = `${base}${quant === undefined ? "" : `-${quant.toLowerCase()}`}.gguf`;
  return (
    `it looks like llama-server's -hf shorthand (<user>/<repo>[:<quant>]), which names no file: write ` +
    `hf:${user}/${repo}/<file>.gguf, e.g. hf:${user}/${repo}/${guess} if that is the file's name ` +
    `(the repository's files are listed at ${HF_DEFAULT_ENDPOINT}/${user}/${repo}/tree/main)`
  );
}

/**
 * A model file given as a path must be there at start: the boot stops with this message otherwise (a mount
 * that is missing, a typo, llama-server's -hf shorthand), instead of a process that answers only 503.
 * `configured` is LOCALDECIDER_MODEL as written, `file` where it was looked for.
 */
export function checkModelFile(configured: string, file: string): void {
  let stat: fs.Stats;
  const where = path.isAbsolute(configured) ? file : `${configured} (looked for at ${file})`;
  try {
    stat = fs.statSync(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const hint = hfShorthandHint(configured);
    const what = code === "ENOENT" ? "there is no such file" : `it cannot be read (${code ?? String(err)})`;
    throw new Error(
      `LOCALDECIDER_MODEL: model file ${where}: ${what}; ${
        hint ?? "give the path of a GGUF file, an http(s) URL, or hf:<user>/<repo>/<file>.gguf"
      }`,
    );
  }
  if (!stat.isFile()) {
    throw new Error(
      `LOCALDECIDER_MODEL: model file ${where}: it is not a file (a directory?); name the .gguf file itself`,
    );
  }
}

function sha256Hex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** A URL as it may be shown: scheme, host and path; never credentials, a query or a fragment. */
export function shownUrl(url: URL): string {
  return `${url.protocol}//${url.host}${url.pathname}`;
}

/**
 * A value that did not parse as a URL, as it may be shown in a message: anything between `scheme://` and the
 * last `@` cut out (credentials, which may hold `?` or `#` themselves), then all from the first `?` or `#` (a
 * query may carry a signature).
 */
function shownUnparsed(value: string): string {
  return value.replace(/^([a-z][a-z0-9+.-]*:\/\/).*@/is, "$1").replace(/[?#].*$/s, "");
}

/** host/path/of/[query-<hash>/]file.gguf, every segment made safe for a file name (no `..`, no separators). */
function cachePathOf(url: URL): string {
  const segments = [url.host, ...url.pathname.split("/")]
    .map((s) => decodeURIComponent(s).replace(/[\\/:*?"<>|\0]/g, "_"))
    .filter((s) => s !== "" && s !== "." && s !== "..");
  if (url.search !== "") {
    // Hashed, not spelled out: a query can be longer than a file name may be.
    const query = sha256Hex(url.search).slice(0, 16);
    segments.splice(segments.length - 1, 0, `query-${query}`);
  }
  return path.join(...segments);
}

/** The per-user cache directory for models: XDG on Linux, Library/Caches on macOS, LOCALAPPDATA on Windows. */
export function defaultModelsDir(env: NodeJS.ProcessEnv = process.env, platform = process.platform): string {
  const home = os.homedir();
  if (platform === "win32")
    return path.join(env.LOCALAPPDATA ?? path.join(home, "AppData", "Local"), "localdecider", "models");
  if (platform === "darwin") return path.join(home, "Library", "Caches", "localdecider", "models");
  const cache =
    env.XDG_CACHE_HOME !== undefined && env.XDG_CACHE_HOME !== "" ? env.XDG_CACHE_HOME : path.join(home, ".cache");
  return path.join(cache, "localdecider", "models");
}
