/** Just enough of a Dockerfile's final stage to replay it without Docker. */
export interface RuntimeStage {
  env: Record<string, string>;
  workdir: string;
  /** `COPY --from=build <src> <dest>` pairs. */
  copies: { from: string; src: string; dest: string }[];
  user: string | undefined;
  healthcheck: string[];
  entrypoint: string[];
  expose: number[];
}

/** Joins `\` continuations, drops comments, and reads the instructions of the last stage. */
export function runtimeStage(dockerfile: string): RuntimeStage {
  const lines = dockerfile
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"));
  const lastFrom = lines.map((l) => l.startsWith("FROM ")).lastIndexOf(true);
  const stage: RuntimeStage = {
    env: {},
    workdir: "/",
    copies: [],
    user: undefined,
    healthcheck: [],
    entrypoint: [],
    expose: [],
  };
  for (const line of lines.slice(lastFrom + 1)) {
    const [instruction = "", ...rest] = line.split(/\s+/);
    const args = rest.join(" ");
    switch (instruction) {
      case "ENV":
        for (const m of args.matchAll(/([A-Z_][A-Z0-9_]*)=(\S*)/g)) stage.env[m[1] as string] = m[2] as string;
        break;
      case "WORKDIR":
        stage.workdir = args;
        break;
      case "COPY": {
        const m = /^--from=(\S+)\s+(\S+)\s+(\S+)$/.exec(args);
        if (!m) throw new Error(`final stage copies from the build context: ${line}`);
        stage.copies.push({ from: m[1] as string, src: m[2] as string, dest: m[3] as string });
        break;
      }
      case "USER":
        stage.user = args;
        break;
      case "HEALTHCHECK":
        stage.healthcheck = JSON.parse(args.slice(args.indexOf("CMD ") + 4)) as string[];
        break;
      case "ENTRYPOINT":
        stage.entrypoint = JSON.parse(args) as string[];
        break;
      case "EXPOSE":
        stage.expose.push(...args.split(/\s+/).map(Number));
        break;
    }
  }
  return stage;
}
