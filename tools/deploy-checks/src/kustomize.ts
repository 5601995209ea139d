import { existsSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { parseAllDocuments } from "yaml";
import { REPO_ROOT } from "./repo";

/**
 * A small reader of the Kustomize files in deploy/kubernetes, so that the objects a user would apply are
 * checked on a machine without kubectl (`pnpm test` runs on Node alone). It knows the few features those
 * files use and refuses any other key, so a kustomization that outgrows it fails here rather than being read
 * wrongly. Where kubectl is present, test/kustomize-reader.test.ts renders every overlay with `kubectl kustomize`
 * too and requires the same objects.
 *
 * Supported: `resources` (YAML files and directories holding a kustomization), `components` (directories
 * whose kustomization is `kind: Component`, applied after the resources, in order), `namespace` (set on
 * every namespaced object, as Kustomize does), and `patches`: a JSON 6902 list of operations (`add`,
 * `replace`, `remove`, `test`) applied to the objects its `target` names by kind and name, or an object
 * with `$patch: delete` (no target), which removes the object of that kind and name; and `images` (name,
 * newName, newTag, digest) on the containers and init containers of pod templates, as Kustomize rewrites
 * them: a digest replaces the tag (`newName@sha256:...`).
 */

/** A Kubernetes object as read from YAML; only the parts the checks read are typed. */
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [key: string]: unknown };
  // biome-ignore lint/suspicious/noExplicitAny: the rest of an object is any shape its kind allows
  [key: string]: any;
}

/** Objects with no namespace (of the kinds these files use). */
const CLUSTER_SCOPED = new Set(["Namespace", "PersistentVolume", "StorageClass", "ClusterRole", "ClusterRoleBinding"]);

const KUSTOMIZATION_KEYS = new Set(["apiVersion", "kind", "namespace", "resources", "components", "patches", "images"]);

export interface Kustomization {
  apiVersion?: string;
  kind?: string;
  namespace?: string;
  resources?: string[];
  components?: string[];
  patches?: { path: string; target?: { kind: string; name: string } }[];
  /** Kustomize's image transformer, as a user's own kustomization pins images (docs/kubernetes.md). */
  images?: ImageEntry[];
}

export interface ImageEntry {
  name: string;
  newName?: string;
  newTag?: string;
  digest?: string;
}

/** A kustomization directory rendered as Kustomize would: its objects, in the order they were read. */
export function renderKustomization(dir: string): K8sObject[] {
  return build(path.resolve(REPO_ROOT, dir), "Kustomization");
}

/**
 * A kustomization that is not on disk (a user's own, as docs/kubernetes.md shows one), its paths relative to
 * `dir` (relative to the repository root).
 */
export function renderInline(k: Kustomization, dir: string): K8sObject[] {
  const file = path.join(REPO_ROOT, dir, "kustomization.yaml");
  return buildFrom(checkKustomization(k, file, "Kustomization"), path.resolve(REPO_ROOT, dir), []);
}

function readKustomization(dir: string, expectedKind: "Kustomization" | "Component"): Kustomization {
  const file = path.join(dir, "kustomization.yaml");
  if (!existsSync(file)) throw new Error(`${dir} has no kustomization.yaml`);
  const parsed = parseAllDocuments(readFileSync(file, "utf8"));
  return checkKustomization(parsed[0]?.toJS() as Kustomization, file, expectedKind);
}

function checkKustomization(k: Kustomization, file: string, expectedKind: "Kustomization" | "Component") {
  for (const key of Object.keys(k)) {
    if (!KUSTOMIZATION_KEYS.has(key)) throw new Error(`${file}: "${key}" is not a feature this reader supports`);
  }
  if ((k.kind ?? "Kustomization") !== expectedKind) {
    throw new Error(`${file}: kind ${k.kind} where a ${expectedKind} is expected`);
  }
  for (const patch of k.patches ?? []) {
    const keys = Object.keys(patch).filter((key) => key !== "path" && key !== "target");
    if (keys.length > 0) throw new Error(`${file}: patch keys ${keys.join(", ")} are not supported here`);
  }
  return k;
}

function build(dir: string, kind: "Kustomization" | "Component", base: K8sObject[] = []): K8sObject[] {
  return buildFrom(readKustomization(dir, kind), dir, base);
}

function buildFrom(k: Kustomization, dir: string, base: K8sObject[]): K8sObject[] {
  let objects = [...base];
  for (const resource of k.resources ?? []) {
    const target = path.resolve(dir, resource);
    if (statSync(target).isDirectory()) objects.push(...build(target, "Kustomization"));
    else objects.push(...readObjects(target));
  }
  for (const component of k.components ?? []) objects = build(path.resolve(dir, component), "Component", objects);
  for (const patch of k.patches ?? []) objects = applyPatch(objects, path.resolve(dir, patch.path), patch.target);
  for (const entry of k.images ?? []) objects = objects.map((o) => setImage(o, entry));
  if (k.namespace !== undefined) {
    for (const object of objects) if (!CLUSTER_SCOPED.has(object.kind)) object.metadata.namespace = k.namespace;
  }
  assertUnique(objects, dir);
  return objects;
}

/** `name[:tag][@digest]` split into its parts (a `:` after the last `/` starts the tag). */
export function splitImage(image: string): { name: string; tag?: string; digest?: string } {
  const [rest, digest] = image.split("@") as [string, string | undefined];
  const colon = rest.lastIndexOf(":");
  const tagged = colon > rest.lastIndexOf("/");
  return {
    name: tagged ? rest.slice(0, colon) : rest,
    ...(tagged ? { tag: rest.slice(colon + 1) } : {}),
    ...(digest === undefined ? {} : { digest }),
  };
}

function setImage(object: K8sObject, entry: ImageEntry): K8sObject {
  const pod = object.spec?.template?.spec;
  if (pod === undefined) return object;
  const copy = structuredClone(object);
  const copyPod = copy.spec.template.spec;
  for (const c of [...(copyPod.initContainers ?? []), ...(copyPod.containers ?? [])] as { image: string }[]) {
    const parts = splitImage(c.image);
    if (parts.name !== entry.name) continue;
    const name = entry.newName ?? parts.name;
    if (entry.digest !== undefined) c.image = `${name}@${entry.digest}`;
    else if (entry.newTag !== undefined) c.image = `${name}:${entry.newTag}`;
    else
      c.image = `${name}${parts.tag === undefined ? "" : `:${parts.tag}`}${parts.digest === undefined ? "" : `@${parts.digest}`}`;
  }
  return copy;
}

/** Every object of a multi-document YAML file. */
export function readObjects(file: string): K8sObject[] {
  return parseAllDocuments(readFileSync(file, "utf8"))
    .map((doc) => {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]?.message}`);
      return doc.toJS() as K8sObject | null;
    })
    .filter((o): o is K8sObject => o !== null);
}

function assertUnique(objects: K8sObject[], dir: string): void {
  const seen = new Set<string>();
  for (const o of objects) {
    const id = objectId(o);
    if (seen.has(id)) throw new Error(`${dir}: ${id} is defined twice`);
    seen.add(id);
  }
}

/** `Kind/name`, what Kustomize keys an object by (within one namespace). */
export function objectId(o: Pick<K8sObject, "kind" | "metadata">): string {
  return `${o.kind}/${o.metadata.name}`;
}

type Operation = { op: "add" | "replace" | "remove" | "test"; path: string; value?: unknown };

function applyPatch(objects: K8sObject[], file: string, target: { kind: string; name: string } | undefined) {
  const content = parseAllDocuments(readFileSync(file, "utf8"))[0]?.toJS() as unknown;
  if (target === undefined) {
    const del = content as K8sObject & { $patch?: string };
    if (del.$patch !== "delete") throw new Error(`${file}: only a $patch: delete is supported without a target`);
    const id = objectId(del);
    if (!objects.some((o) => objectId(o) === id)) throw new Error(`${file}: no ${id} to delete`);
    return objects.filter((o) => objectId(o) !== id);
  }
  if (!Array.isArray(content)) throw new Error(`${file}: a patch with a target must be a JSON 6902 list`);
  const matched = objects.filter((o) => o.kind === target.kind && o.metadata.name === target.name);
  if (matched.length === 0) throw new Error(`${file}: its target ${target.kind}/${target.name} is not there`);
  return objects.map((o) => (matched.includes(o) ? jsonPatch(o, content as Operation[], file) : o));
}

/** RFC 6902 `add`, `replace`, `remove` and `test` on a copy of `document`. */
export function jsonPatch<T>(document: T, operations: Operation[], where = "patch"): T {
  const root = structuredClone(document) as unknown;
  for (const op of operations) {
    const tokens = op.path
      .split("/")
      .slice(1)
      .map((t) => t.replace(/~1/g, "/").replace(/~0/g, "~"));
    const last = tokens.pop();
    if (last === undefined) throw new Error(`${where}: the whole document cannot be patched here`);
    let parent = root as Record<string, unknown> | unknown[];
    for (const token of tokens) {
      const next = Array.isArray(parent) ? parent[Number(token)] : parent[token];
      if (typeof next !== "object" || next === null) throw new Error(`${where}: ${op.path} does not exist`);
      parent = next as Record<string, unknown> | unknown[];
    }
    if (Array.isArray(parent)) {
      const index = last === "-" ? parent.length : Number(last);
      if (
        !Number.isInteger(index) ||
        index < 0 ||
        index > parent.length ||
        (op.op !== "add" && index === parent.length)
      ) {
        throw new Error(`${where}: ${op.path} is out of range`);
      }
      if (op.op === "add") parent.splice(index, 0, structuredClone(op.value));
      else if (op.op === "replace") parent[index] = structuredClone(op.value);
      else if (op.op === "remove") parent.splice(index, 1);
      else if (JSON.stringify(parent[index]) !== JSON.stringify(op.value))
        throw new Error(`${where}: test of ${op.path} failed`);
    } else {
      const exists = Object.hasOwn(parent, last);
      if (op.op !== "add" && !exists) throw new Error(`${where}: ${op.path} does not exist`);
      if (op.op === "add" || op.op === "replace") parent[last] = structuredClone(op.value);
      else if (op.op === "remove") delete parent[last];
      else if (JSON.stringify(parent[last]) !== JSON.stringify(op.value))
        throw new Error(`${where}: test of ${op.path} failed`);
    }
  }
  return root as T;
}

/** deploy/kubernetes, relative to the repository root. */
export const KUBERNETES_DIR = "deploy/kubernetes";

/** The overlays a user applies, one `kubectl apply -k` each. */
export const OVERLAYS = ["embedded", "llama-server", "native", "gpu"] as const;

/** The optional components, layered by a kustomization of the user's own (docs/kubernetes.md). */
export const COMPONENTS = ["shared-limits", "keda", "service-monitor", "postgres"] as const;
