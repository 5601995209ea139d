import { stages } from "./dockerfile";

/**
 * Supply-chain pins (docs/deploy.md, "Image pins"): a workflow runs each action at a full commit SHA, with
 * the tag it stands for in a comment beside it, and every image (a Dockerfile's base, a compose service's, a
 * workflow's service container) is named by tag and digest. A tag can be moved by whoever publishes it; a
 * commit SHA or a digest names one content for good.
 */

/** An image named by tag and by its index digest: `name:tag@sha256:<64 hex>`. */
export const PINNED_IMAGE = /^[a-z0-9][a-z0-9._/:-]*:[A-Za-z0-9_][A-Za-z0-9._-]*@sha256:[0-9a-f]{64}$/;

/**
 * Images left at a tag because no digest for it could be found from any source reachable where these files
 * were written (no registry is); each with the reason. Any other tag-only image is refused, and so is a new
 * tag of these: a version bump must come with its digest.
 */
export const UNRESOLVED_IMAGES: Record<string, string> = {
  "ghcr.io/ggml-org/llama.cpp:server-b11206":
    "no public source names this tag's digest; resolve it with `docker buildx imagetools inspect` and pin it",
  "ghcr.io/ggml-org/llama.cpp:server-b11361":
    "the first build with native /v1/systemone (docker/compose.llama-decision.yml); no public source names its digest either",
};

/** Why `image` is not pinned, or undefined when it is (or is a listed exception). */
export function imageProblem(image: string): string | undefined {
  if (PINNED_IMAGE.test(image)) return undefined;
  if (image in UNRESOLVED_IMAGES) return undefined;
  return `${image} is not pinned by digest (name:tag@sha256:<digest>)`;
}

/** Every `FROM` of a Dockerfile that names an image rather than one of its own earlier stages. */
export function dockerfileImages(dockerfile: string): string[] {
  const all = stages(dockerfile);
  return all.filter((stage, i) => !all.slice(0, i).some((s) => s.name === stage.base)).map((s) => s.base);
}

export interface ActionUse {
  line: number;
  action: string;
  ref: string;
  /** The tag written beside the SHA (`# v4.4.0`), if any. */
  tag: string | undefined;
}

/** Every `uses:` of a workflow, with its line and the comment that follows it. */
export function actionUses(workflow: string): ActionUse[] {
  const uses: ActionUse[] = [];
  for (const [i, text] of workflow.split("\n").entries()) {
    const m = /^\s*(?:-\s+)?uses:\s*["']?([^\s"'#]+)["']?\s*(?:#\s*(\S+))?/.exec(text);
    if (m === null) continue;
    const [action, ref] = (m[1] as string).split("@");
    uses.push({ line: i + 1, action: action as string, ref: ref ?? "", tag: m[2] });
  }
  return uses;
}

/** Why a `uses:` is not pinned, or undefined: a full commit SHA with its tag (`# vX.Y.Z`), a local action or a digest. */
export function actionProblem(use: ActionUse): string | undefined {
  if (use.action.startsWith("./")) return undefined;
  if (use.action.startsWith("docker://")) {
    return /@sha256:[0-9a-f]{64}$/.test(`${use.action}@${use.ref}`)
      ? undefined
      : `line ${use.line}: ${use.action} is not pinned by digest`;
  }
  if (!/^[0-9a-f]{40}$/.test(use.ref)) return `line ${use.line}: ${use.action}@${use.ref} is not pinned by commit SHA`;
  if (use.tag === undefined || !/^v\d+(\.\d+){0,2}$/.test(use.tag)) {
    return `line ${use.line}: ${use.action}@${use.ref} has no "# vX.Y.Z" comment naming the tag it stands for`;
  }
  return undefined;
}
