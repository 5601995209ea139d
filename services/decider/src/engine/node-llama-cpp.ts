import { randomUUID } from "node:crypto";
import type * as NodeLlamaCpp from "node-llama-cpp";

export type { NodeLlamaCpp };

/**
 * node-llama-cpp is ESM only and an optional dependency (the server-mode image leaves it out). Under Jest,
 * swc turns `import()` into `require()`, which cannot load ESM, and tsc keeps it; a Function body is
 * compiled by neither, so this is a real dynamic import in both cases (Jest also needs
 * NODE_OPTIONS=--experimental-vm-modules for it; see the decider's `test` script). The body is unique per
 * load of this module: V8 caches compiled Function bodies by their text, with the importing context of the
 * first compile, so under Jest a second test file in the same worker would import through the first
 * file's torn-down environment.
 */
const importEsm = new Function("specifier", `return import(specifier); // ${randomUUID()}`) as (
  specifier: string,
) => Promise<unknown>;

/** The module, or a clear error when this installation left it out. */
export async function importNodeLlamaCpp(): Promise<typeof NodeLlamaCpp> {
  try {
    return (await importEsm("node-llama-cpp")) as typeof NodeLlamaCpp;
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND") {
      throw new Error(
        "the embedded engine (node-llama-cpp) is not installed here: this is the server-mode build. " +
          "Set LOCALDECIDER_UPSTREAM to an OpenAI-compatible model server, or use the embedded image target",
      );
    }
    throw err;
  }
}
