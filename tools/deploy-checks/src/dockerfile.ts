/** One `FROM` of a Dockerfile: its base (an image or an earlier stage's name) and its instructions. */
export interface Stage {
  name: string | undefined;
  base: string;
  /** The stage's instructions after FROM, continuations joined, comments dropped. */
  lines: string[];
}

/** Just enough of a Dockerfile's final stage to replay it without Docker. */
export interface RuntimeStage {
  /** The image it starts from, after following stages built on other stages. */
  image: string;
  env: Record<string, string>;
  workdir: string;
  /** `COPY --from=<stage> <src> <dest>` triples. */
  copies: { from: string; src: string; dest: string }[];
  /** `RUN` commands, in order, the inherited ones first. */
  runs: string[];
  user: string | undefined;
  healthcheck: string[];
  entrypoint: string[];
  expose: number[];
}

/** Joins `\` continuations, drops comments, and splits the instructions by stage. */
export function stages(dockerfile: string): Stage[] {
  const lines = dockerfile
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"));
  const result: Stage[] = [];
  for (const line of lines) {
    const from = /^FROM\s+(\S+)(?:\s+AS\s+(\S+))?$/i.exec(line);
    if (from) result.push({ base: from[1] as string, name: from[2], lines: [] });
    else if (result.length === 0) throw new Error(`instruction before the first FROM: ${line}`);
    else result[result.length - 1]?.lines.push(line);
  }
  return result;
}

/** The stage named `target`, or the last one (what `docker build` without `--target` makes). */
export function stageNamed(dockerfile: string, target?: string): Stage {
  const all = stages(dockerfile);
  const stage = target === undefined ? all[all.length - 1] : all.find((s) => s.name === target);
  if (!stage) throw new Error(`no stage ${target ?? "at all"}`);
  return stage;
}

/**
 * The instructions of a target (default: the last stage), with those of the stages it is built `FROM`
 * applied first, as Docker does.
 */
export function runtimeStage(dockerfile: string, target?: string): RuntimeStage {
  const all = stages(dockerfile);
  const chain: Stage[] = [];
  for (let stage: Stage | undefined = stageNamed(dockerfile, target); stage; ) {
    chain.unshift(stage);
    const base: string = stage.base;
    stage = all.find((s) => s.name === base);
  }
  const result: RuntimeStage = {
    image: (chain[0] as Stage).base,
    env: {},
    workdir: "/",
    copies: [],
    runs: [],
    user: undefined,
    healthcheck: [],
    entrypoint: [],
    expose: [],
  };
  for (const line of chain.flatMap((s) => s.lines)) {
    const [instruction = "", ...rest] = line.split(/\s+/);
    const args = rest.join(" ");
    switch (instruction) {
      case "ENV":
        for (const m of args.matchAll(/([A-Z_][A-Z0-9_]*)=(\S*)/g)) result.env[m[1] as string] = m[2] as string;
        break;
      case "WORKDIR":
        result.workdir = args;
        break;
      case "COPY": {
        const m = /^--from=(\S+)\s+(\S+)\s+(\S+)$/.exec(args);
        if (!m) throw new Error(`final stage copies from the build context: ${line}`);
        result.copies.push({ from: m[1] as string, src: m[2] as string, dest: m[3] as string });
        break;
      }
      case "RUN":
        result.runs.push(args);
        break;
      case "USER":
        result.user = args;
        break;
      case "HEALTHCHECK":
        result.healthcheck = JSON.parse(args.slice(args.indexOf("CMD ") + 4)) as string[];
        break;
      case "ENTRYPOINT":
        result.entrypoint = JSON.parse(args) as string[];
        break;
      case "EXPOSE":
        result.expose.push(...args.split(/\s+/).map(Number));
        break;
    }
  }
  return result;
}

/**
 * The shell steps of a build stage from its `pnpm ... deploy` on: what makes the `/out` folder a final
 * stage copies. Earlier steps (install, build) are left out: the workspace they act on is the checkout
 * itself when this is replayed.
 */
export function deployCommand(dockerfile: string, stageName: string): string {
  const stage = stageNamed(dockerfile, stageName);
  for (const line of stage.lines) {
    if (!line.startsWith("RUN ")) continue;
    const steps = line.slice(4).split(/\s+&&\s+/);
    const at = steps.findIndex((step) => /^pnpm\b.*\sdeploy\s/.test(step));
    if (at >= 0) return steps.slice(at).join(" && ");
  }
  throw new Error(`stage ${stageName} runs no pnpm deploy`);
}
