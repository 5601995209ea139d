import { objectId } from "../src/kustomize";
import { findKubectl, kubectlRender, render, VARIANTS } from "./support/kubernetes";

// Where kubectl is present (the development machines), its own Kustomize renders every overlay, and
// renders it to exactly the objects this package's reader makes (src/kustomize.ts), which every other
// check reads. On a Node-only machine the tests below are not defined: the objects are still checked, from
// the reader, by test/kubernetes.test.ts; and the reader's JSON patches are tested here either way.
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
