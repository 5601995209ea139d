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
      (e) => !semver.satisfies(oldest, e.node) || !semver.satisfies(process.versions.node, e.node),
    );
    expect(refusing).toStrictEqual([]);
  });
});
