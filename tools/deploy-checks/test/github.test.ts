import { existsSync } from "node:fs";
import { parse } from "yaml";
import { stages } from "../src/dockerfile";
import { COMPOSE_FILES, composeText, interpolations, readRepoFile, repoPath } from "../src/repo";

interface Step {
  uses?: string;
  run?: string;
  with?: Record<string, unknown>;
  env?: Record<string, string>;
}
interface Job {
  services?: Record<string, { image: string }>;
  strategy?: { matrix?: Record<string, unknown[]> & { include?: Record<string, string>[] } };
  steps: Step[];
}

const workflow = parse(readRepoFile(".github", "workflows", "ci.yml")) as { jobs: Record<string, Job> };
const dependabot = parse(readRepoFile(".github", "dependabot.yml")) as {
  version: number;
  updates: { "package-ecosystem": string; directory?: string; directories?: string[] }[];
};

describe(".github/workflows/ci.yml", () => {
  it("runs the README's test command after a frozen install, lint, typecheck and build, with Postgres 16 beside it", () => {
    const test = workflow.jobs.test as Job;
    const runs = test.steps.map((s) => s.run).filter(Boolean);
    expect(runs).toStrictEqual([
      "npm install --global pnpm@12.21.0",
      "pnpm install --frozen-lockfile",
      "pnpm run build",
      "pnpm run lint",
      "pnpm run typecheck",
      "pnpm test",
    ]);
    expect(test.services?.postgres?.image).toMatch(/^postgres:16@sha256:[0-9a-f]{64}$/);
    expect(test.strategy?.matrix?.node).toStrictEqual(["20", "22"]);
  });

  it("renders every compose stack with `docker compose config`, giving each variable a compose file requires", () => {
    const compose = workflow.jobs.compose as Job & { env?: Record<string, string> };
    const rendered = compose.steps.flatMap((s) => (s.run ?? "").split("\n")).filter((l) => l.includes("config"));
    expect(rendered.map((line) => line.trim())).toStrictEqual(
      COMPOSE_FILES.map((file) =>
        file === "docker-compose.yml"
          ? "docker compose -f docker-compose.yml config --quiet"
          : `docker compose -f docker-compose.yml -f ${file} config --quiet`,
      ),
    );
    // Compose refuses to render a file whose `${NAME:?...}` is unset: the job sets each such NAME.
    const required = new Set(
      COMPOSE_FILES.flatMap((file) =>
        interpolations(composeText(file))
          .filter((i) => i.required)
          .map((i) => i.name),
      ),
    );
    expect([...required].filter((name) => !(name in (compose.env ?? {})))).toStrictEqual([]);
  });

  it("builds both images without pushing them", () => {
    const images = workflow.jobs.images as Job;
    expect(images.strategy?.matrix?.service).toStrictEqual(["todos", "decider"]);
    const build = images.steps.find((s) => s.uses?.startsWith("docker/build-push-action@"));
    expect(build?.with).toMatchObject({
      context: ".",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a GitHub expression, not a JS template
      file: "services/${{ matrix.service }}/Dockerfile",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a GitHub expression, not a JS template
      target: "${{ matrix.target }}",
      push: false,
    });
  });

  it("builds every image target: each Dockerfile's last stage, and the decider's embedded one", () => {
    const matrix = (workflow.jobs.images as Job).strategy?.matrix ?? {};
    // GitHub's expansion: the cross product, then each `include` entry as a job of its own (none of these
    // entries matches a combination without overwriting one of its values).
    const jobs = [
      ...(matrix.service ?? []).flatMap((service) => (matrix.target ?? []).map((target) => ({ service, target }))),
      ...(matrix.include ?? []),
    ];
    const built = jobs.map(({ service, target }) => {
      const all = stages(readRepoFile("services", String(service), "Dockerfile"));
      // A target named for the last stage builds what a plain `docker build` (and compose) builds.
      return {
        service,
        target,
        last: all[all.length - 1]?.name === target,
        exists: all.some((s) => s.name === target),
      };
    });
    expect(built).toStrictEqual([
      { service: "todos", target: "runtime", last: true, exists: true },
      { service: "decider", target: "runtime", last: true, exists: true },
      { service: "decider", target: "embedded", last: false, exists: true },
    ]);
  });

  it("pins the pnpm the root package.json asks for", () => {
    const rootPackage = JSON.parse(readRepoFile("package.json")) as {
      packageManager?: string;
      engines?: { pnpm?: string };
    };
    const pinned = rootPackage.engines?.pnpm ?? rootPackage.packageManager?.replace(/^pnpm@/, "");
    expect(readRepoFile(".github", "workflows", "ci.yml")).toContain(`pnpm@${pinned}`);
    expect(readRepoFile(".ci", "run")).toContain(`PNPM_VERSION=${pinned}`);
  });
});

describe("one build path", () => {
  const rootPackage = JSON.parse(readRepoFile("package.json")) as { scripts: Record<string, string> };

  it("gives `pnpm test` no install, build, lint or typecheck of its own: scripts/test.js does only what is missing", () => {
    expect(rootPackage.scripts.test).toBe("node scripts/test.js");
  });

  it("lets CI's test step skip the lint and typecheck its own steps already ran, and nothing else", () => {
    const test = workflow.jobs.test as Job;
    const marked = test.steps.filter((s) => s.env?.LOCALDECIDER_STATIC_CHECKS !== undefined);
    expect(marked.map((s) => [s.run, s.env?.LOCALDECIDER_STATIC_CHECKS])).toStrictEqual([["pnpm test", "done"]]);
    const runs = test.steps.map((s) => s.run);
    expect(runs.indexOf("pnpm run lint")).toBeLessThan(runs.indexOf("pnpm test"));
    expect(runs.indexOf("pnpm run typecheck")).toBeLessThan(runs.indexOf("pnpm test"));
    const script = readRepoFile("scripts", "test.js");
    expect(script).toContain('process.env.LOCALDECIDER_STATIC_CHECKS === "done"');
    expect(script).toContain('pnpm(["run", "lint"])');
    expect(script).toContain('pnpm(["run", "typecheck"])');
  });

  it("keeps .ci/run a thin wrapper: install the pinned pnpm if missing, then exactly `pnpm test`", () => {
    const commands = readRepoFile(".ci", "run")
      .split("\n")
      .map((line) => line.trim())
      .filter((line) => line !== "" && !line.startsWith("#"));
    expect(commands.at(-1)).toBe("pnpm test");
    expect(commands.join("\n")).not.toMatch(/apt-get|pg_ctlcluster|chromium/);
  });
});

describe(".github/dependabot.yml", () => {
  it("updates npm, both Dockerfiles, the compose files' images and the workflow actions, in folders that exist", () => {
    expect(dependabot.version).toBe(2);
    const byEcosystem = Object.fromEntries(
      dependabot.updates.map((u) => [u["package-ecosystem"], u.directories ?? [u.directory]]),
    );
    expect(byEcosystem).toStrictEqual({
      npm: ["/"],
      docker: ["/services/todos", "/services/decider"],
      "docker-compose": ["/", "/docker"],
      "github-actions": ["/"],
    });
    for (const dir of Object.values(byEcosystem).flat()) {
      expect({ dir, exists: existsSync(repoPath(String(dir))) }).toStrictEqual({ dir, exists: true });
    }
    expect(existsSync(repoPath("services/todos/Dockerfile"))).toBe(true);
    expect(existsSync(repoPath("services/decider/Dockerfile"))).toBe(true);
  });
});
