import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { jsonPatch, objectId, renderKustomization, splitImage } from "../src/kustomize";
import { findKubectl, kubectlRender, render, VARIANTS } from "./support/kubernetes";

// The reader that renders deploy/kubernetes without kubectl: RFC 6902 as Kustomize applies it, and a
// refusal of any kustomization feature it does not know (rather than reading it wrongly). Where kubectl is
// present (the development machines), its own Kustomize renders every overlay to exactly the objects the
// reader makes, which every other check reads. On a Node-only machine those tests are not defined (the
// objects are still checked, from the reader, by test/kubernetes.test.ts).
describe("jsonPatch", () => {
  const doc = { spec: { list: ["a", "b"], map: { k: 1 } } };

  it("adds (at an index, at the end with -), replaces and removes, on a copy", () => {
    const out = jsonPatch(doc, [
      { op: "add", path: "/spec/list/1", value: "x" },
      { op: "add", path: "/spec/list/-", value: "z" },
      { op: "replace", path: "/spec/map/k", value: 2 },
      { op: "add", path: "/spec/new~1key", value: { a: 1 } },
      { op: "remove", path: "/spec/list/0" },
      { op: "test", path: "/spec/map/k", value: 2 },
    ]);
    expect(out).toStrictEqual({ spec: { list: ["x", "b", "z"], map: { k: 2 }, "new/key": { a: 1 } } });
    expect(doc).toStrictEqual({ spec: { list: ["a", "b"], map: { k: 1 } } });
  });

  it("fails a test that does not hold, and a replace or remove of what is not there", () => {
    expect(() => jsonPatch(doc, [{ op: "test", path: "/spec/map/k", value: 5 }])).toThrow("test of /spec/map/k failed");
    expect(() => jsonPatch(doc, [{ op: "replace", path: "/spec/none", value: 1 }])).toThrow("does not exist");
    expect(() => jsonPatch(doc, [{ op: "remove", path: "/spec/list/2" }])).toThrow("out of range");
    expect(() => jsonPatch(doc, [{ op: "add", path: "/spec/no/such", value: 1 }])).toThrow("does not exist");
  });
});

describe("splitImage", () => {
  it("splits name, tag and digest, a registry port not taken for a tag", () => {
    expect(splitImage("registry:5000/a/b:1.2@sha256:abc")).toStrictEqual({
      name: "registry:5000/a/b",
      tag: "1.2",
      digest: "sha256:abc",
    });
    expect(splitImage("registry:5000/a/b")).toStrictEqual({ name: "registry:5000/a/b" });
    expect(splitImage("b@sha256:abc")).toStrictEqual({ name: "b", digest: "sha256:abc" });
  });
});

describe("renderKustomization", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), "kustomize-reader-"));
    writeFileSync(path.join(dir, "a.yaml"), "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n");
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("refuses a feature it does not implement", () => {
    writeFileSync(path.join(dir, "kustomization.yaml"), "resources: [a.yaml]\nconfigMapGenerator:\n  - name: x\n");
    expect(() => renderKustomization(dir)).toThrow('"configMapGenerator" is not a feature this reader supports');
  });

  it("refuses an object defined twice and a patch whose target is missing", () => {
    writeFileSync(path.join(dir, "kustomization.yaml"), "resources: [a.yaml, a.yaml]\n");
    expect(() => renderKustomization(dir)).toThrow("Service/a is defined twice");
    writeFileSync(path.join(dir, "p.yaml"), "- op: add\n  path: /spec\n  value: {}\n");
    writeFileSync(
      path.join(dir, "kustomization.yaml"),
      "resources: [a.yaml]\npatches:\n  - path: p.yaml\n    target: { kind: Service, name: b }\n",
    );
    expect(() => renderKustomization(dir)).toThrow("its target Service/b is not there");
  });

  it("rewrites images as Kustomize does: a new name and tag, or a digest in place of the tag", () => {
    writeFileSync(
      path.join(dir, "d.yaml"),
      "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template:\n    spec:\n      initContainers: [{ name: i, image: 'x/a:1' }]\n      containers: [{ name: c, image: 'x/a:1' }, { name: e, image: 'b:2' }]\n",
    );
    writeFileSync(
      path.join(dir, "kustomization.yaml"),
      "resources: [d.yaml]\nimages:\n  - { name: x/a, newName: r.example/x/a, digest: 'sha256:ff' }\n  - { name: b, newTag: '3' }\n",
    );
    const pod = renderKustomization(dir)[0]?.spec.template.spec;
    expect([pod.initContainers[0].image, pod.containers[0].image, pod.containers[1].image]).toStrictEqual([
      "r.example/x/a@sha256:ff",
      "r.example/x/a@sha256:ff",
      "b:3",
    ]);
  });

  it("sets the namespace on namespaced objects and deletes with $patch: delete", () => {
    writeFileSync(
      path.join(dir, "n.yaml"),
      "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: n\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: b\n",
    );
    writeFileSync(path.join(dir, "d.yaml"), "$patch: delete\napiVersion: v1\nkind: Service\nmetadata:\n  name: b\n");
    writeFileSync(
      path.join(dir, "kustomization.yaml"),
      "namespace: n\nresources: [a.yaml, n.yaml]\npatches:\n  - path: d.yaml\n",
    );
    expect(renderKustomization(dir)).toStrictEqual([
      { apiVersion: "v1", kind: "Service", metadata: { name: "a", namespace: "n" } },
      { apiVersion: "v1", kind: "Namespace", metadata: { name: "n" } },
    ]);
  });
});

const kubectl = findKubectl();

const byId = (objects: ReturnType<typeof render>) =>
  Object.fromEntries(objects.map((o) => [`${o.metadata.namespace ?? ""}/${objectId(o)}`, o]));

if (kubectl !== undefined) {
  describe("kubectl kustomize", () => {
    it.each(VARIANTS.map((v) => [v.name, v] as const))(
      "renders %s to exactly the objects the reader makes",
      (_name, v) => {
        const theirs = kubectlRender(v);
        expect(theirs.length).toBeGreaterThan(0);
        expect(byId(render(v))).toStrictEqual(byId(theirs));
      },
    );
  });
}
