import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { type CodeBlock, codeBlocks, markdownFiles } from "../src/markdown";
import { readRepoFile } from "../src/repo";
import { type RunningService, startService } from "./support/services";

/**
 * Every shell command in the docs is either run by a test or marked as needing a real server (docs/testing.md,
 * "Commands in these docs"). The marker is the block's first line, visible where the docs are read:
 *
 *     # needs a real server: <what it needs: Docker, a model server, a GPU, ...>
 *
 * Any other shell block must hold only commands listed here, each with the file that runs it and a piece of
 * that file's text showing that it does (checked below, so a claim cannot outlive the code behind it).
 */
const MARKER = /^# needs a real server: \S/;

/** Shell-like info strings; other blocks (ts, json, yaml, text) hold code or output, not commands to run. */
const SHELL = new Set(["sh", "bash", "shell", "console", "zsh"]);

interface RunBy {
  /** The command, as the docs write it (comment and continuation lines joined). */
  command: RegExp;
  /** [file that runs it, text of that file that shows it does]. */
  runners: [string, string][];
}

const THIS_TEST = "tools/deploy-checks/test/docs-commands.test.ts";

const RUN_BY: RunBy[] = [
  {
    // The quickstart's first command: .ci/run installs this very pnpm, and `pnpm start` is the root script
    // whose last step (after the install and build `pnpm test` also runs) start-command.test.ts runs and stops.
    command: /^npm install -g pnpm@12\.21\.0 && pnpm start$/,
    runners: [
      [
        ".ci/run",
        'PNPM_VERSION=12.21.0\nif ! command -v pnpm >/dev/null 2>&1 || [ "$(pnpm --version 2>/dev/null)" != "$PNPM_VERSION" ]; then\n  npm install -g "pnpm@$PNPM_VERSION"',
      ],
      ["tools/deploy-checks/test/start-command.test.ts", 'spawnTracked("pnpm", ["-r", "--parallel", "start"]'],
    ],
  },
  { command: /^pnpm test$/, runners: [[".ci/run", "\npnpm test\n"]] },
  {
    // Run below exactly as the root script's last step runs each service (node dist/main.js), with the
    // variable the command sets, on free ports and a temporary data directory.
    command: /^LOCALDECIDER_MODEL=demo pnpm start$/,
    runners: [[THIS_TEST, 'LOCALDECIDER_MODEL: "demo"']],
  },
  {
    command:
      /^pnpm decider eval --data tools\/decider-eval\/examples\/code-review\.jsonl --url http:\/\/127\.0\.0\.1:8080 --fit$/,
    runners: [
      [
        "services/decider/test/eval.test.ts",
        '"decider", "eval", "--data", "data.jsonl", "--url", served.url, "--out", "eval-out"',
      ],
    ],
  },
  {
    command: /^LOCALDECIDER_CALIBRATION=eval-out\/calibration\.json pnpm --filter @localdecider\/decider start$/,
    runners: [["services/decider/test/eval.test.ts", 'LOCALDECIDER_CALIBRATION: "eval-out/calibration.json"']],
  },
  // `pnpm test` runs each of these as one of its steps (scripts/test.js).
  { command: /^pnpm build$/, runners: [["scripts/test.js", '["run", "build"]']] },
  { command: /^pnpm lint$/, runners: [["scripts/test.js", 'pnpm(["run", "lint"])']] },
  { command: /^pnpm typecheck$/, runners: [["scripts/test.js", 'pnpm(["run", "typecheck"])']] },
  {
    command: /^pnpm --filter @localdecider\/todos test$/,
    runners: [["scripts/test.js", 'pnpm(["-r", "--workspace-concurrency=1", "test"])']],
  },
  // packages/contracts/README.md: as someone outside the repository uses the package.
  {
    command: /^pnpm install && pnpm --filter @localdecider\/contracts build$/,
    runners: [["scripts/test.js", '["install", "--frozen-lockfile"]']],
  },
  {
    command: /^pnpm --filter @localdecider\/contracts pack --pack-destination \/tmp$/,
    runners: [
      ["tools/deploy-checks/test/contracts-package.test.ts", 'run("pnpm", ["pack", "--pack-destination", dir]'],
    ],
  },
  {
    command: /^npm install \/tmp\/localdecider-contracts-0\.1\.0\.tgz zod@\^4\.6\.7$/,
    runners: [["tools/deploy-checks/test/contracts-package.test.ts", '"npm"']],
  },
];

/** The docs' example blocks this file runs against the real services: [file, the block's first command]. */
const EXAMPLES: [string, string][] = [
  ["README.md", "curl -s -X POST localhost:3000/users/alice/todos"],
  ["README.md", "curl -s localhost:8080/v1/systemone"],
  ["services/todos/README.md", "curl -s -X POST localhost:3000/users/alice/todos"],
  ["services/decider/README.md", "curl -s localhost:8080/v1/systemone"],
  ["services/decider/README.md", "curl -s localhost:8080/v1/decisions"],
  ["docs/decider-api.md", "curl -s localhost:8080/v1/systemone"],
  ["docs/decider-api.md", "curl -s localhost:8080/v1/models"],
];

/** Whether a block is one of EXAMPLES, which the last describe runs whole. */
function isExample(file: string, block: CodeBlock): boolean {
  return EXAMPLES.some(([f, first]) => f === file && (commandsOf(block)[0] ?? "").startsWith(first));
}

/**
 * A shell block's commands: comment lines and trailing comments dropped, a line ending in `\` and a quoted
 * string spanning lines joined into one command.
 */
function commandsOf(block: CodeBlock): string[] {
  const commands: string[] = [];
  let current = "";
  let quote: string | undefined;
  for (const line of block.lines) {
    if (quote === undefined && current === "" && (line.trim() === "" || line.trim().startsWith("#"))) continue;
    // Quotes open and close across lines; outside them, a `#` after a space starts a comment to the line's end.
    let text = line;
    for (let i = 0; i < line.length; i++) {
      const char = line[i];
      if (quote === undefined && char === "#" && (i === 0 || /\s/.test(line[i - 1] as string))) {
        text = line.slice(0, i).trimEnd();
        break;
      }
      if (quote === undefined && (char === "'" || char === '"')) quote = char;
      else if (char === quote) quote = undefined;
    }
    current = current === "" ? text : `${current}\n${text}`;
    if (quote === undefined && !text.endsWith("\\")) {
      commands.push(current.trim());
      current = "";
    }
  }
  if (current !== "") commands.push(current.trim());
  return commands;
}

/** The docs' shell blocks that are neither marked nor made only of commands a test runs: `file:line command`. */
function unaccounted(file: string, text: string, runBy = RUN_BY): string[] {
  return codeBlocks(text)
    .filter((block) => SHELL.has(block.info))
    .filter((block) => !MARKER.test((block.lines.find((line) => line.trim() !== "") ?? "").trim()))
    .filter((block) => !isExample(file, block))
    .flatMap((block) =>
      commandsOf(block)
        .filter((command) => !runBy.some((entry) => entry.command.test(command)))
        .map((command) => `${file}:${block.line} ${command.split("\n")[0]}`),
    );
}

describe("every shell command in the docs", () => {
  const files = markdownFiles();

  it("is run by a test, or its block is marked `# needs a real server: ...`", () => {
    expect(files.flatMap((file) => unaccounted(file, readRepoFile(file)))).toStrictEqual([]);
  });

  it("said to be run by a file: that file holds the text that runs it, and the docs still hold the command", () => {
    const commands = files.flatMap((file) =>
      codeBlocks(readRepoFile(file))
        .filter((block) => SHELL.has(block.info))
        .flatMap(commandsOf),
    );
    for (const entry of RUN_BY) {
      for (const [runner, evidence] of entry.runners) {
        expect({ runner, evidence, present: readRepoFile(runner).includes(evidence) }).toStrictEqual({
          runner,
          evidence,
          present: true,
        });
      }
      expect({ command: String(entry.command), used: commands.some((c) => entry.command.test(c)) }).toStrictEqual({
        command: String(entry.command),
        used: true,
      });
    }
  });

  it("each example this file runs is still in its page", () => {
    const missing = EXAMPLES.filter(
      ([file]) => !codeBlocks(readRepoFile(file)).some((block) => isExample(file, block)),
    );
    expect(missing).toStrictEqual([]);
  });

  it("the check itself: an unmarked block with a command no test runs is reported, a marked one is not", () => {
    const text = [
      "```sh",
      "pnpm test",
      "docker compose up   # the stack",
      "curl -s localhost:3000/users/alice/todos",
      "```",
      "```sh",
      "# needs a real server: Docker",
      "docker compose up",
      "```",
      "```json",
      '{"not": "a command"}',
      "```",
    ].join("\n");
    expect(unaccounted("x.md", text)).toStrictEqual([
      "x.md:1 docker compose up",
      "x.md:1 curl -s localhost:3000/users/alice/todos",
    ]);
    expect(
      commandsOf({ info: "sh", line: 1, lines: ["curl -s a -d '{", '  "b": 1', "}'", "x \\", "  y # z's"] }),
    ).toStrictEqual(["curl -s a -d '{\n  \"b\": 1\n}'", "x \\\n  y"]);
  });
});

const run = promisify(execFile);

describe("the docs' examples, run against the real services (as LOCALDECIDER_MODEL=demo pnpm start runs them)", () => {
  let dataDir: string;
  let todos: RunningService;
  let decider: RunningService;

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "docs-examples-"));
    // `pnpm start`'s last step runs each service's `exec node dist/main.js`; startService runs the same file.
    todos = await startService("todos", {
      TODOS_HOST: "127.0.0.1",
      TODOS_PORT: "0",
      TODOS_DATA_DIR: path.join(dataDir, "todos"),
    });
    decider = await startService("decider", {
      LOCALDECIDER_HOST: "127.0.0.1",
      LOCALDECIDER_PORT: "0",
      LOCALDECIDER_MODEL: "demo",
      LOCALDECIDER_MODELS_DIR: path.join(dataDir, "models"),
      LOCALDECIDER_THREADS: "1",
      LOCALDECIDER_CONTEXT_SIZE: "2048",
    });
    // The demo model is written and loaded after the decider listens: /ready says when it answers.
    for (let i = 0; i < 1200 && (await fetch(`${decider.url}/ready`)).status !== 200; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }, 120_000);

  afterAll(async () => {
    await todos?.stop();
    await decider?.stop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it.each(EXAMPLES)("%s: the block that starts `%s` runs, each command answered 2xx with JSON", async (file, first) => {
    const text = await readFile(path.join(__dirname, "..", "..", "..", file), "utf8");
    const block = codeBlocks(text).find((b) => SHELL.has(b.info) && commandsOf(b)[0]?.startsWith(first));
    expect(block).toBeDefined();
    for (const command of commandsOf(block as CodeBlock)) {
      // The ports the services got instead of their defaults; curl told to fail on an error status.
      const local = command
        .replace(/localhost:3000/g, new URL(todos.url).host)
        .replace(/localhost:8080/g, new URL(decider.url).host)
        .replace(/^curl -s /, "curl -sS --fail-with-body ");
      const { stdout } = await run("bash", ["-c", local], { timeout: 60_000 });
      expect({ command, json: (() => JSON.parse(stdout) as unknown)() }).toStrictEqual({
        command,
        json: expect.anything(),
      });
    }
  });
});
