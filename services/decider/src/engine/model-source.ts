import os from "node:os";
import path from "node:path";

/** The default model: see the decider README ("Embedded engine") for why, its size and licence. */
export const DEFAULT_MODEL = "hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF/qwen2.5-1.5b-instruct-q4_k_m.gguf";

/** Where LOCALDECIDER_MODEL points: a GGUF file on disk, or one to download (an http(s) URL or an hf: URI). */
export type ModelSource =
  | { kind: "file"; path: string }
  | {
      kind: "download";
      /** As the user wrote it, without credentials: for logs, /ready and errors. */
      uri: string;
      url: string;
      /** Relative path under LOCALDECIDER_MODELS_DIR: the URL's host and path, so two sources never share a file. */
      cachePath: string;
    };

const HF = /^hf:([^/\s#]+)\/([^/\s#]+)\/([^#\s]+\.gguf)(?:#([^\s#]+))?$/i;

/**
 * Parses LOCALDECIDER_MODEL. An hf: URI names one file, `hf:<user>/<repo>/<file>.gguf[#<branch>]`; the
 * `hf:<user>/<repo>:<quant>` form that node-llama-cpp also reads is not taken, since finding its file needs
 * a search we would then have to trust blindly. Throws with a message for the boot error.
 */
export function parseModelSource(value: string, cwd = process.cwd()): ModelSource {
  if (value.startsWith("hf:")) {
    const m = HF.exec(value);
    if (m === null) {
      throw new Error(
        `"${value}" is not an hf: URI of one file: write hf:<user>/<repo>/<file>.gguf (optionally #<branch>)`,
      );
    }
    const [, user, repo, file, branch] = m as unknown as [string, string, string, string, string | undefined];
    const url = `https://huggingface.co/${user}/${repo}/resolve/${branch ?? "main"}/${file}`;
    return { kind: "download", uri: value, url, cachePath: cachePathOf(new URL(url)) };
  }
  if (/^https?:\/\//i.test(value)) {
    if (!URL.canParse(value)) throw new Error(`"${value}" is not a valid URL`);
    const url = new URL(value);
    if (path.posix.basename(url.pathname) === "") throw new Error(`"${value}" names no file`);
    const shown = new URL(url);
    shown.username = "";
    shown.password = "";
    return { kind: "download", uri: shown.toString(), url: url.toString(), cachePath: cachePathOf(url) };
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) {
    throw new Error(`"${value}": only a file path, an http(s) URL or an hf: URI can be loaded`);
  }
  return { kind: "file", path: path.resolve(cwd, value) };
}

/** host/path/of/file.gguf, every segment made safe for a file name (no `..`, no separators). */
function cachePathOf(url: URL): string {
  const segments = [url.host, ...url.pathname.split("/")]
    .map((s) => decodeURIComponent(s).replace(/[\\/:*?"<>|\0]/g, "_"))
    .filter((s) => s !== "" && s !== "." && s !== "..");
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
