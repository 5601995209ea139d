import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parse, parseAllDocuments } from "yaml";
import {
  type K8sObject,
  KUBERNETES_DIR,
  type Kustomization,
  OVERLAYS,
  renderInline,
  renderKustomization,
} from "../../src/kustomize";
import { REPO_ROOT } from "../../src/repo";

/**
 * What a user applies: each overlay, and overlays with the optional components layered by a kustomization
 * of one's own, as docs/kubernetes.md shows it (in a directory `my-localdecider` at the repository root).
 */
export interface Variant {
  name: string;
  /** An overlay directory, or a kustomization of the user's own. */
  overlay?: (typeof OVERLAYS)[number];
  own?: Kustomization;
}

const own = (overlay: string, components: string[]): Kustomization => ({
  namespace: "localdecider",
  resources: [`../${KUBERNETES_DIR}/overlays/${overlay}`],
  components: components.map((c) => `../${KUBERNETES_DIR}/components/${c}`),
});

/**
 * The kustomization of one's own that docs/kubernetes.md shows (the yaml block that starts with its file
 * name), its `<digest of your push>` filled in.
 */
export function docsKustomization(): Kustomization {
  const docs = readFileSync(path.join(REPO_ROOT, "docs", "kubernetes.md"), "utf8");
  const block = /```yaml\n(# my-localdecider\/kustomization\.yaml\n[\s\S]*?)```/.exec(docs)?.[1];
  if (block === undefined) throw new Error("docs/kubernetes.md shows no my-localdecider/kustomization.yaml");
  return parse(block.replaceAll("<digest of your push>", "0".repeat(64))) as Kustomization;
}

export const VARIANTS: Variant[] = [
  ...OVERLAYS.map((overlay) => ({ name: overlay, overlay })),
  { name: "docs/kubernetes.md's own kustomization", own: docsKustomization() },
  {
    name: "llama-server + keda, service-monitor, postgres",
    own: own("llama-server", ["keda", "service-monitor", "postgres"]),
  },
  { name: "native + postgres", own: own("native", ["postgres"]) },
  { name: "embedded + service-monitor, postgres", own: own("embedded", ["service-monitor", "postgres"]) },
];

/** Where docs/kubernetes.md has the user write their own kustomization. */
export const OWN_DIR = "my-localdecider";

export function render(variant: Variant): K8sObject[] {
  if (variant.overlay !== undefined) return renderKustomization(`${KUBERNETES_DIR}/overlays/${variant.overlay}`);
  return renderInline(variant.own as Kustomization, OWN_DIR);
}

/** `kubectl` on PATH, or undefined. */
export function findKubectl(): string | undefined {
  try {
    execFileSync("kubectl", ["version", "--client"], { stdio: "ignore" });
    return "kubectl";
  } catch {
    return undefined;
  }
}

/** The variant as `kubectl kustomize` renders it (a user's own kustomization written to a temporary directory). */
export function kubectlRender(variant: Variant): K8sObject[] {
  let dir: string;
  let cleanup = () => {};
  if (variant.overlay !== undefined) dir = path.join(REPO_ROOT, KUBERNETES_DIR, "overlays", variant.overlay);
  else {
    // Beside the repository's own path depth, so that the user's `../deploy/...` paths resolve the same.
    const temp = mkdtempSync(path.join(tmpdir(), "k8s-own-"));
    const k = variant.own as Kustomization;
    const rebase = (p: string) => path.relative(temp, path.resolve(REPO_ROOT, OWN_DIR, p));
    const file = { ...k, resources: (k.resources ?? []).map(rebase), components: (k.components ?? []).map(rebase) };
    writeFileSync(path.join(temp, "kustomization.yaml"), JSON.stringify(file));
    dir = temp;
    cleanup = () => rmSync(temp, { recursive: true, force: true });
  }
  try {
    const out = execFileSync("kubectl", ["kustomize", dir], { encoding: "utf8", maxBuffer: 16 * 1024 * 1024 });
    return parseAllDocuments(out)
      .map((d) => d.toJS() as K8sObject | null)
      .filter((o): o is K8sObject => o !== null);
  } finally {
    cleanup();
  }
}

export function find(objects: K8sObject[], kind: string, name: string): K8sObject {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (found === undefined) throw new Error(`no ${kind}/${name}`);
  return found;
}

/** The first container (or the named one) of a workload's pod template. */
// biome-ignore lint/suspicious/noExplicitAny: a container as read from YAML
export function container(workload: K8sObject, name?: string): any {
  const pod = workload.spec.template.spec;
  // biome-ignore lint/suspicious/noExplicitAny: as above
  const all = [...(pod.initContainers ?? []), ...pod.containers] as any[];
  return name === undefined ? pod.containers[0] : all.find((c) => c.name === name);
}
