import { existsSync, readdirSync, statSync } from "node:fs";
import { KUBERNETES_UNRESOLVED_IMAGES, workloads } from "../src/kubernetes";
import { COMPONENTS, KUBERNETES_DIR, OVERLAYS } from "../src/kustomize";
import { readRepoFile, repoPath } from "../src/repo";
import { render, VARIANTS } from "./support/kubernetes";

// docs/kubernetes.md's commands match the files: what it applies exists, every Secret the manifests read
// is created there with its key, every workload it names is one the manifests run.
const docs = readRepoFile("docs", "kubernetes.md");

/** The docs' shell commands, continuation lines joined, from every ```sh block. */
const commands = [...docs.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) =>
  (m[1] as string)
    .replace(/\\\n\s*/g, " ")
    .split("\n")
    .map((line) => line.replace(/\s+#.*$/, "").trim())
    .filter((line) => line !== "" && !line.startsWith("#")),
);
const all = VARIANTS.flatMap((v) => render(v));

describe("docs/kubernetes.md", () => {
  it("applies, diffs and renders only kustomizations that exist (or the one it shows how to write)", () => {
    const paths = commands.flatMap((c) => [
      ...c.matchAll(/kubectl (?:apply|diff|delete) -k (\S+)|kubectl kustomize (\S+)/g),
    ]);
    expect(paths.length).toBeGreaterThan(4);
    for (const m of paths) {
      const dir = (m[1] ?? m[2]) as string;
      const known = dir === "my-localdecider" || existsSync(repoPath(dir, "kustomization.yaml"));
      expect({ dir, known }).toStrictEqual({ dir, known: true });
    }
  });

  it("shows `kubectl apply -k` for every overlay, and names every component; no overlay or component goes unlisted", () => {
    for (const overlay of OVERLAYS)
      expect(commands).toContain(`kubectl apply -k ${KUBERNETES_DIR}/overlays/${overlay}`);
    for (const component of COMPONENTS) expect(docs).toContain(`${KUBERNETES_DIR}/components/${component}`);
    const dirs = (sub: string) =>
      readdirSync(repoPath(KUBERNETES_DIR, sub)).filter((d) =>
        statSync(repoPath(KUBERNETES_DIR, sub, d)).isDirectory(),
      );
    expect(dirs("overlays").sort()).toStrictEqual([...OVERLAYS].sort());
    expect(dirs("components").sort()).toStrictEqual([...COMPONENTS].sort());
  });

  it("creates every Secret the manifests read, in their namespace, with each key they read", () => {
    const refs = new Set<string>();
    for (const w of workloads(all)) {
      for (const c of [...(w.pod.initContainers ?? []), ...w.pod.containers]) {
        for (const e of c.env ?? []) {
          const ref = e.valueFrom?.secretKeyRef;
          if (ref !== undefined) refs.add(`${ref.name} ${ref.key}`);
        }
      }
    }
    expect(refs.size).toBeGreaterThan(3);
    const created = commands.flatMap((c) => {
      const m = /^kubectl -n localdecider create secret generic (\S+) (.*)$/.exec(c);
      return m === null
        ? []
        : [...(m[2] as string).matchAll(/--from-literal=([A-Za-z_]+)=/g)].map((k) => `${m[1]} ${k[1]}`);
    });
    for (const ref of refs) expect({ ref, created: created.includes(ref) }).toStrictEqual({ ref, created: true });
    const namespaces = new Set(all.filter((o) => o.kind !== "Namespace").map((o) => o.metadata.namespace));
    expect([...namespaces]).toStrictEqual(["localdecider"]);
  });

  it("names only workloads the manifests run in its rollout, exec and dump commands", () => {
    const named = commands.flatMap((c) => [...c.matchAll(/\b(deployment|statefulset)\/([a-z-]+)/g)]);
    expect(named.length).toBeGreaterThan(4);
    const kinds: Record<string, string> = { deployment: "Deployment", statefulset: "StatefulSet" };
    for (const m of named) {
      const id = `${kinds[m[1] as string]}/${m[2]}`;
      expect({ id, runs: all.some((o) => `${o.kind}/${o.metadata.name}` === id) }).toStrictEqual({ id, runs: true });
    }
  });

  it("names every image left at a tag, and the smoke script, which exists", () => {
    for (const image of Object.keys(KUBERNETES_UNRESOLVED_IMAGES)) expect(docs).toContain(`\`${image}\``);
    const tagOnly = workloads(all)
      .flatMap((w) => w.pod.containers.map((c: { image: string }) => c.image))
      .filter((image: string) => image.startsWith("ghcr.io/"));
    for (const image of new Set(tagOnly)) expect(docs).toContain(`\`${image}\``);
    expect(docs).toContain(`${KUBERNETES_DIR}/smoke.sh`);
    expect(existsSync(repoPath(KUBERNETES_DIR, "smoke.sh"))).toBe(true);
  });
});
