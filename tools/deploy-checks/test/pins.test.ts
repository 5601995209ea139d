import { readdirSync } from "node:fs";
import path from "node:path";
import { parse } from "yaml";
import {
  actionProblem,
  actionUses,
  dockerfileImages,
  imageProblem,
  PINNED_IMAGE,
  UNRESOLVED_IMAGES,
} from "../src/pins";
import { COMPOSE_FILES, loadCompose, REPO_ROOT, readRepoFile } from "../src/repo";

// Supply chain (issue 24, point 11): actions by commit SHA, images by digest, so that neither can change
// under the same name. docs/deploy.md, "Image pins", says how to update them.

/** Files of the repository (not its dependencies or build output) whose name passes `keep`. */
function repoFiles(keep: (name: string) => boolean, dir = REPO_ROOT): string[] {
  const skip = new Set(["node_modules", ".git", "dist", "data", "eval-out"]);
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return skip.has(entry.name) ? [] : repoFiles(keep, full);
    return keep(entry.name) ? [path.relative(REPO_ROOT, full)] : [];
  });
}

const WORKFLOWS = readdirSync(path.join(REPO_ROOT, ".github", "workflows"))
  .filter((name) => /\.ya?ml$/.test(name))
  .map((name) => path.join(".github", "workflows", name));
const DOCKERFILES = repoFiles((name) => name === "Dockerfile" || name.endsWith(".Dockerfile"));

describe("the pin rules", () => {
  it("accept an image by tag and digest, and refuse one by tag, by a short digest, or by digest alone", () => {
    const digest = "a".repeat(64);
    expect(imageProblem(`postgres:16-bookworm@sha256:${digest}`)).toBeUndefined();
    expect(imageProblem(`ghcr.io/org/image:v1.2@sha256:${digest}`)).toBeUndefined();
    expect(
      ["node:22.21.1-bookworm-slim", "postgres:16", `redis:8@sha256:${"a".repeat(12)}`, `caddy@sha256:${digest}`].map(
        (image) => imageProblem(image) !== undefined,
      ),
    ).toStrictEqual([true, true, true, true]);
  });

  it("accept an action by commit SHA with its tag beside it, and refuse a tag, a branch or a SHA without its tag", () => {
    const check = (line: string) => actionUses(line).map(actionProblem);
    const sha = "11d5960a326750d5838078e36cf38b85af677262";
    expect(check(`      - uses: actions/checkout@${sha} # v4.4.0`)).toStrictEqual([undefined]);
    expect(check("    uses: ./.github/actions/local")).toStrictEqual([undefined]);
    expect(check(`      - uses: docker://alpine@sha256:${"b".repeat(64)}`)).toStrictEqual([undefined]);
    for (const bad of [
      "      - uses: actions/checkout@v4",
      "      - uses: actions/checkout@main",
      `      - uses: actions/checkout@${sha}`,
      `      - uses: actions/checkout@${sha.slice(0, 7)} # v4.4.0`,
      "      - uses: docker://alpine:3",
    ]) {
      expect({ bad, refused: check(bad)[0] !== undefined }).toStrictEqual({ bad, refused: true });
    }
  });
});

describe("the repository's pins", () => {
  it.each(WORKFLOWS)("%s runs every action at a commit SHA, its tag in a comment", (file) => {
    const uses = actionUses(readRepoFile(file));
    expect(uses.length).toBeGreaterThan(0);
    expect(uses.map(actionProblem).filter(Boolean)).toStrictEqual([]);
  });

  it.each(WORKFLOWS)("%s runs its service and job containers from images pinned by digest", (file) => {
    const workflow = parse(readRepoFile(file)) as {
      jobs: Record<string, { container?: string | { image: string }; services?: Record<string, { image: string }> }>;
    };
    const images = Object.values(workflow.jobs).flatMap((job) => [
      ...(job.container === undefined ? [] : [typeof job.container === "string" ? job.container : job.container.image]),
      ...Object.values(job.services ?? {}).map((s) => s.image),
    ]);
    expect(images.map(imageProblem).filter(Boolean)).toStrictEqual([]);
  });

  it("finds the Dockerfiles it checks", () => {
    expect(DOCKERFILES.sort()).toStrictEqual(["services/decider/Dockerfile", "services/todos/Dockerfile"]);
  });

  it.each(DOCKERFILES)(
    "%s starts every stage from an image pinned by digest, or from one of its own stages",
    (file) => {
      const images = dockerfileImages(readRepoFile(file));
      expect(images.length).toBeGreaterThan(0);
      expect(images.map(imageProblem).filter(Boolean)).toStrictEqual([]);
    },
  );

  it.each(COMPOSE_FILES)("%s runs every service from an image pinned by digest, or builds it", (file) => {
    const services = Object.entries(loadCompose(file).services);
    const problems = services.flatMap(([name, svc]) =>
      svc.image === undefined ? [] : [imageProblem(svc.image)].filter(Boolean).map((p) => `${name}: ${p}`),
    );
    expect(problems).toStrictEqual([]);
  });

  it("leaves at a tag only the listed images, each used somewhere and documented with how to pin it", () => {
    const deploy = readRepoFile("docs", "deploy.md");
    const composed = COMPOSE_FILES.flatMap((f) => Object.values(loadCompose(f).services).map((s) => s.image));
    for (const image of Object.keys(UNRESOLVED_IMAGES)) {
      expect({ image, pinned: PINNED_IMAGE.test(image), used: composed.includes(image) }).toStrictEqual({
        image,
        pinned: false,
        used: true,
      });
      expect(deploy).toContain(`\`${image}\``);
    }
  });
});
