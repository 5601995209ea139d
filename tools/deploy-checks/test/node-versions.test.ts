import { parse } from "yaml";
import { readRepoFile } from "../src/repo";

// semver ships no types of its own; these are the two functions used.
const semver = require("semver") as {
  satisfies(version: string, range: string, options?: { includePrerelease?: boolean }): boolean;
  minVersion(range: string): { version: string } | null;
};

/** Every package in pnpm-lock.yaml with the engines.node it declares (pnpm records it there). */
function lockedEngines(): { id: string; node: string }[] {
  const lock = parse(readRepoFile("pnpm-lock.yaml")) as {
    packages: Record<string, { engines?: { node?: string }; os?: string[] }>;
  };
  return Object.entries(lock.packages).flatMap(([id, info]) =>
    info.engines?.node === undefined ? [] : [{ id, node: info.engines.node }],
  );
}

/**
 * Packages that declare a newer Node and are installed anyway, each for the tests only (a devDependency that
 * no deployed service loads), with why. openai 7.x declares Node >= 22; its `client.decisions.create` is the
 * official client of OpenAI's Decisions dialect, which the decider's tests call it through (issue 31). It ran
 * on Node 20.20 in every test here; the decider's own chat client stays on openai 6.x for Node 20.
 */
const TEST_ONLY_NEWER_NODE: Record<string, { package: string; alias: string; spec: string }> = {
  "openai@7.59.0": { package: "services/decider/package.json", alias: "openai7", spec: "npm:openai@7.59.0" },
};

describe("the Node versions the README promises", () => {
  const root = JSON.parse(readRepoFile("package.json")) as { engines: { node: string } };
  const oldest = semver.minVersion(root.engines.node)?.version ?? "";

  it("the root's engines.node is the README's minimum", () => {
    expect(root.engines.node).toBe(">=20.19");
    expect(readRepoFile("README.md")).toContain("Node >= 20.19");
  });

  // A dependency that declares a newer Node than the oldest we promise makes `pnpm install` warn
  // (`Unsupported engine`) and may not run there: @prisma/streams-local (Node >= 22, under the prisma CLI's
  // `prisma dev`, which we never run) was removed from the install by an override in pnpm-workspace.yaml.
  it("every installed package accepts the oldest Node the root allows, and the one running these tests", () => {
    const engines = lockedEngines();
    expect(engines.length).toBeGreaterThan(50);
    const refusing = engines.filter(
      (e) =>
        !(e.id in TEST_ONLY_NEWER_NODE) &&
        (!semver.satisfies(oldest, e.node) || !semver.satisfies(process.versions.node, e.node)),
    );
    expect(refusing).toStrictEqual([]);
  });

  it("a package let through for the tests only is a devDependency, under its alias, and no service's dependency", () => {
    for (const [id, where] of Object.entries(TEST_ONLY_NEWER_NODE)) {
      const manifest = JSON.parse(readRepoFile(where.package)) as {
        dependencies?: Record<string, string>;
        devDependencies?: Record<string, string>;
      };
      expect({ id, dev: manifest.devDependencies?.[where.alias] }).toStrictEqual({ id, dev: where.spec });
      expect(Object.values(manifest.dependencies ?? {})).not.toContain(where.spec);
      expect(Object.keys(manifest.dependencies ?? {})).not.toContain(where.alias);
    }
  });
});
