import { existsSync } from "node:fs";
import { COMPOSE_FILES, type ComposeService, loadCompose, readRepoFile, repoPath, SECRET_NAME } from "../src/repo";

const compose = loadCompose("docker-compose.yml");

function service(name: string): ComposeService {
  const found = compose.services[name];
  if (found === undefined) throw new Error(`docker-compose.yml has no service "${name}"`);
  return found;
}

function healthTest(name: string): string {
  const test = service(name).healthcheck?.test;
  return Array.isArray(test) ? test.join(" ") : String(test ?? "");
}

describe("docker-compose.yml services", () => {
  it("has exactly the stack's four services: postgres, todos, model, decider", () => {
    expect(Object.keys(compose.services)).toStrictEqual(["postgres", "todos", "model", "decider"]);
  });

  it("gives every service a healthcheck with a test command", () => {
    for (const name of Object.keys(compose.services)) {
      expect({ name, test: healthTest(name).length > 0 }).toStrictEqual({ name, test: true });
    }
  });

  it("runs postgres from the official image with a pinned major, pg_isready and a named volume", () => {
    const pg = service("postgres");
    expect(pg.image).toMatch(/^postgres:16(\.\d+)?(-[a-z0-9]+)?$/);
    expect(healthTest("postgres")).toContain("pg_isready");
    const volume = (pg.volumes ?? [])[0]?.split(":")[0] ?? "";
    expect(Object.keys(compose.volumes ?? {})).toContain(volume);
  });

  it("builds todos from its Dockerfile, after postgres is healthy, probing /ready, with DATABASE_URL at postgres", () => {
    const todos = service("todos");
    expect(todos.build).toStrictEqual({ context: ".", dockerfile: "services/todos/Dockerfile" });
    expect(todos.depends_on).toStrictEqual({ postgres: { condition: "service_healthy" } });
    expect(healthTest("todos")).toContain("/ready");
    expect(String(todos.environment?.DATABASE_URL)).toMatch(/^postgresql:\/\/.+@postgres:5432\//);
    expect(todos.environment?.TODOS_HOST).toBe("0.0.0.0");
    // biome-ignore lint/suspicious/noTemplateCurlyInString: compose interpolation syntax, not a JS template
    expect(todos.ports).toStrictEqual(["127.0.0.1:${TODOS_PORT:-3000}:${TODOS_PORT:-3000}"]);
  });

  it("runs a pinned OpenAI-compatible model server whose healthcheck waits for the loaded model", () => {
    const model = service("model");
    expect(model.image).toMatch(/^ghcr\.io\/ggml-org\/llama\.cpp:server-b\d+$/);
    expect(healthTest("model")).toContain("http://127.0.0.1:8081/health");
    // Getting the model is part of `up`: the server downloads it into a named volume on first start.
    expect(model.command).toEqual(expect.arrayContaining(["--hf-repo", "--hf-file", "--alias", "--port", "8081"]));
    const cache = (model.volumes ?? [])[0]?.split(":") ?? [];
    expect(Object.keys(compose.volumes ?? {})).toContain(cache[0]);
    expect(model.environment?.LLAMA_CACHE).toBe(cache[1]);
  });

  it("builds the decider from its Dockerfile, pointed at the model service, after the model is healthy, probing /ready", () => {
    const decider = service("decider");
    expect(decider.build).toStrictEqual({ context: ".", dockerfile: "services/decider/Dockerfile" });
    expect(decider.depends_on).toStrictEqual({ model: { condition: "service_healthy" } });
    expect(healthTest("decider")).toContain("/ready");
    expect(decider.environment?.LOCALDECIDER_UPSTREAM).toBe("http://model:8081");
    expect(decider.environment?.LOCALDECIDER_HOST).toBe("0.0.0.0");
    // The alias llama.cpp serves is the model name the decider asks for.
    const command = service("model").command ?? [];
    expect(command[command.indexOf("--alias") + 1]).toBe(decider.environment?.LOCALDECIDER_UPSTREAM_MODEL);
  });

  it("refers only to Dockerfiles that exist", () => {
    for (const name of ["todos", "decider"]) {
      const dockerfile = service(name).build?.dockerfile ?? "";
      expect({ dockerfile, exists: existsSync(repoPath(dockerfile)) }).toStrictEqual({ dockerfile, exists: true });
    }
  });
});

describe("alternative model servers", () => {
  it("Ollama override: pinned image, a one-shot pull the decider waits for, decider pointed at Ollama", () => {
    const ollama = loadCompose("docker/compose.ollama.yml");
    expect(ollama.services.model?.image).toMatch(/^ollama\/ollama:\d+\.\d+\.\d+$/);
    expect(ollama.services.model?.healthcheck?.test).toBeDefined();
    expect(ollama.services["model-pull"]?.command?.[0]).toBe("pull");
    expect(ollama.services["model-pull"]?.depends_on).toStrictEqual({ model: { condition: "service_healthy" } });
    expect(ollama.services.decider?.depends_on).toStrictEqual({
      "model-pull": { condition: "service_completed_successfully" },
    });
    expect(ollama.services.decider?.environment?.LOCALDECIDER_UPSTREAM).toBe("http://model:11434");
  });

  it("vLLM override: pinned image on an NVIDIA GPU reservation, same port and model name as the default", () => {
    const vllm = loadCompose("docker/compose.vllm.yml");
    const model = vllm.services.model as ComposeService & { deploy?: unknown };
    expect(model.image).toMatch(/^vllm\/vllm-openai:v\d+\.\d+\.\d+$/);
    expect(model.deploy).toStrictEqual({
      resources: { reservations: { devices: [{ driver: "nvidia", count: "all", capabilities: ["gpu"] }] } },
    });
    expect(model.command).toEqual(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: compose interpolation syntax, not a JS template
      expect.arrayContaining(["--served-model-name", "${LOCALDECIDER_UPSTREAM_MODEL:-qwen2.5-1.5b-instruct}"]),
    );
    expect(model.healthcheck?.test).toBeDefined();
  });
});

describe("no secrets in compose files", () => {
  it("takes every password, key and token from the environment, never as a literal", () => {
    for (const file of COMPOSE_FILES) {
      const services = loadCompose(file).services;
      for (const [name, svc] of Object.entries(services)) {
        for (const [key, value] of Object.entries(svc.environment ?? {})) {
          if (!SECRET_NAME.test(key)) continue;
          expect({ file, name, key, value }).toStrictEqual({
            file,
            name,
            key,
            value: expect.stringMatching(/^\$\{[A-Z_]+:[-?][^}]*\}$/),
          });
        }
      }
      // Nor inside a connection string.
      expect(readRepoFile(file)).not.toMatch(/postgres(ql)?:\/\/[^:$]+:[^$@]+@/);
    }
  });

  it("requires POSTGRES_PASSWORD to be set rather than defaulting it", () => {
    expect(service("postgres").environment?.POSTGRES_PASSWORD).toMatch(/^\$\{POSTGRES_PASSWORD:\?/);
  });
});
