import { existsSync } from "node:fs";
import { hostAllowed, hostPolicy, loadConfig, PROBE_PATHS } from "@localdecider/service-kit";
import { drainSeconds } from "../src/drain";
import {
  COMPOSE_FILES,
  type ComposeFile,
  type ComposeService,
  durationSeconds,
  isOneShot,
  loadCompose,
  mergeCompose,
  readRepoFile,
  repoPath,
  SECRET_NAME,
  serviceSchemas,
} from "../src/repo";

const compose = loadCompose("docker-compose.yml");
/** An image pinned by tag, optionally also by digest (`name:tag@sha256:...`, see docs/deploy.md). */
const DIGEST = "(@sha256:[0-9a-f]{64})?";

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
  it("has exactly the stack's services: postgres, the one-shot db-setup, todos, model, decider", () => {
    expect(Object.keys(compose.services)).toStrictEqual(["postgres", "db-setup", "todos", "model", "decider"]);
    expect(Object.keys(compose.services).filter((name) => isOneShot(service(name)))).toStrictEqual(["db-setup"]);
  });

  it("gives every long-running service a healthcheck with a test command", () => {
    for (const name of Object.keys(compose.services).filter((n) => !isOneShot(service(n)))) {
      expect({ name, test: healthTest(name).length > 0 }).toStrictEqual({ name, test: true });
    }
  });

  it("runs postgres from the official image with a pinned major, pg_isready and a named volume", () => {
    const pg = service("postgres");
    expect(pg.image).toMatch(new RegExp(`^postgres:16(\\.\\d+)?(-[a-z0-9]+)?${DIGEST}$`));
    expect(healthTest("postgres")).toContain("pg_isready");
    const volume = (pg.volumes ?? [])[0]?.split(":")[0] ?? "";
    expect(Object.keys(compose.volumes ?? {})).toContain(volume);
  });

  it("builds todos from its Dockerfile, after postgres is healthy, probing /ready, with DATABASE_URL at postgres", () => {
    const todos = service("todos");
    expect(todos.build).toStrictEqual({ context: ".", dockerfile: "services/todos/Dockerfile" });
    expect(todos.depends_on).toStrictEqual({
      postgres: { condition: "service_healthy" },
      "db-setup": { condition: "service_completed_successfully" },
    });
    expect(healthTest("todos")).toContain("/ready");
    expect(String(todos.environment?.DATABASE_URL)).toMatch(/^postgresql:\/\/.+@postgres:5432\//);
    expect(todos.environment?.TODOS_HOST).toBe("0.0.0.0");
    // biome-ignore lint/suspicious/noTemplateCurlyInString: compose interpolation syntax, not a JS template
    expect(todos.ports).toStrictEqual(["127.0.0.1:${TODOS_PORT:-3000}:${TODOS_PORT:-3000}"]);
  });

  it("runs a pinned OpenAI-compatible model server whose healthcheck waits for the loaded model", () => {
    const model = service("model");
    expect(model.image).toMatch(new RegExp(`^ghcr\\.io/ggml-org/llama\\.cpp:server-b\\d+${DIGEST}$`));
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
    expect(ollama.services.model?.image).toMatch(new RegExp(`^ollama/ollama:\\d+\\.\\d+\\.\\d+${DIGEST}$`));
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
    expect(model.image).toMatch(new RegExp(`^vllm/vllm-openai:v\\d+\\.\\d+\\.\\d+${DIGEST}$`));
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

describe("a decision model on llama.cpp's native /v1/systemone (docker/compose.llama-decision.yml)", () => {
  const file = loadCompose("docker/compose.llama-decision.yml");
  const stack = mergeCompose(compose, file);
  const model = stack.services.model as ComposeService;
  const decider = stack.services.decider as ComposeService;
  const argument = (flag: string) => model.command?.[(model.command?.indexOf(flag) ?? -2) + 1];
  /** `${NAME:-fallback}` as .env.example leaves it: the fallback. */
  const fallback = (value: unknown) => /^\$\{[A-Z_]+:-([^}]*)\}$/.exec(String(value))?.[1] ?? String(value);

  it("runs a llama.cpp build with decision mode (b11361 or later), pinned", () => {
    const build = new RegExp(`^ghcr\\.io/ggml-org/llama\\.cpp:server-b(\\d+)${DIGEST}$`).exec(model.image ?? "");
    expect(Number(build?.[1])).toBeGreaterThanOrEqual(11361);
  });

  it("serves a decision model from Hugging Face under the name the decider asks for, on the main file's port", () => {
    expect(fallback(argument("--hf-repo"))).toBe("ggml-org/Laya-GGUF:BF16");
    expect(model.command).not.toContain("--hf-file");
    expect(argument("--alias")).toBe(decider.environment?.LOCALDECIDER_UPSTREAM_MODEL);
    expect(argument("--port")).toBe("8081");
    expect(decider.environment?.LOCALDECIDER_UPSTREAM).toBe("http://model:8081");
  });

  it("points the decider at it as a native System One upstream", () => {
    expect(file.services.decider?.environment?.LOCALDECIDER_UPSTREAM_PROTOCOL).toBe("systemone");
  });

  it("gives an encoder's micro-batch room for one slot's whole prompt (ctx-size / parallel), with batch >= ubatch", () => {
    const ubatch = Number(fallback(argument("--ubatch-size")));
    const perSlot = Number(fallback(argument("--ctx-size"))) / Number(fallback(argument("--parallel")));
    expect(ubatch).toBeGreaterThanOrEqual(perSlot);
    expect(Number(fallback(argument("--batch-size")))).toBeGreaterThanOrEqual(ubatch);
  });

  it("keeps the main file's model volume, cache, healthcheck and start order", () => {
    expect(model.volumes).toStrictEqual(service("model").volumes);
    expect(model.environment?.LLAMA_CACHE).toBe(service("model").environment?.LLAMA_CACHE);
    expect(healthTest("model")).toContain("http://127.0.0.1:8081/health");
    expect(model.healthcheck).toStrictEqual(service("model").healthcheck);
    expect(decider.depends_on).toStrictEqual({ model: { condition: "service_healthy" } });
  });
});

describe("images of every compose file", () => {
  it("are pinned by a version tag (and optionally a digest), never latest or a bare name", () => {
    for (const file of COMPOSE_FILES) {
      for (const [name, svc] of Object.entries(loadCompose(file).services)) {
        if (svc.image === undefined) continue;
        const tag = new RegExp(`^[a-z0-9./-]+:([A-Za-z0-9._-]+)${DIGEST}$`).exec(svc.image)?.[1] ?? "";
        expect({ file, name, image: svc.image, pinned: /\d/.test(tag) && !/latest/.test(tag) }).toStrictEqual({
          file,
          name,
          image: svc.image,
          pinned: true,
        });
      }
    }
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

  it("requires both PostgreSQL passwords to be set rather than defaulting them: the superuser's and todos'", () => {
    expect(service("postgres").environment?.POSTGRES_PASSWORD).toMatch(/^\$\{POSTGRES_ADMIN_PASSWORD:\?/);
    expect(service("db-setup").environment?.PGPASSWORD).toMatch(/^\$\{POSTGRES_ADMIN_PASSWORD:\?/);
    expect(service("db-setup").environment?.TODOS_DB_PASSWORD).toMatch(/^\$\{POSTGRES_PASSWORD:\?/);
    expect(String(service("todos").environment?.DATABASE_URL)).toContain(":${POSTGRES_PASSWORD:?");
  });
});

// ---- the Host check against DNS rebinding (issue 19, point 5) ----------------------------------------------

/**
 * Whom a service of the compose stack answers, read as the service reads it: compose's value for its
 * allowlist with `.env`'s part filled in, parsed by the service's own schema (its built config), and the
 * service kit's policy (the one main.ts applies).
 */
function composeHostPolicy(name: "todos" | "decider", dotEnv: string, authenticated: boolean) {
  const prefix = name === "todos" ? "TODOS" : "LOCALDECIDER";
  const environment = service(name).environment ?? {};
  const value = String(environment[`${prefix}_ALLOWED_HOSTS`]).replace(/\$\{[A-Z_]+:-\}/, dotEnv);
  const config = loadConfig(serviceSchemas()[name], {
    [`${prefix}_ALLOWED_HOSTS`]: value,
    [`${prefix}_HOST`]: String(environment[`${prefix}_HOST`]),
  }) as Record<string, unknown>;
  return hostPolicy({
    configured: config[`${prefix}_ALLOWED_HOSTS`] as Parameters<typeof hostPolicy>[0]["configured"],
    listenHost: String(config[`${prefix}_HOST`]),
    authenticated,
  });
}

describe.each([
  ["todos", 3000],
  ["decider", 8080],
] as const)("the Host check of %s in docker-compose.yml", (name, port) => {
  it("answers its compose name (other containers) and loopback (the published port), refuses a rebound name", () => {
    for (const authenticated of [false, true]) {
      const policy = composeHostPolicy(name, "", authenticated);
      const answered = [`${name}:${port}`, `127.0.0.1:${port}`, `localhost:${port}`, "rebind.attacker.example"].map(
        (host) => policy !== undefined && hostAllowed(policy, host),
      );
      expect({ authenticated, answered }).toStrictEqual({ authenticated, answered: [true, true, true, false] });
    }
  });

  it("keeps the names .env adds, and .env's * turns the check off", () => {
    const policy = composeHostPolicy(name, "api.example.com,.corp.example", false);
    expect(
      [`${name}:${port}`, "api.example.com", "x.corp.example:443", "rebind.attacker.example"].map(
        (host) => policy !== undefined && hostAllowed(policy, host),
      ),
    ).toStrictEqual([true, true, true, false]);
    expect(composeHostPolicy(name, "*", false)).toBeUndefined();
  });

  it("probes a path the check leaves open, on loopback", () => {
    // fetch('http://127.0.0.1:'+(process.env.PORT||n)+'/ready')
    const test = healthTest(name);
    const host = /http:\/\/([^:'/]+)/.exec(test)?.[1];
    const path = /\+'(\/[^']*)'\)/.exec(test)?.[1] ?? "";
    expect({ host, path, open: (PROBE_PATHS as readonly string[]).includes(path) }).toStrictEqual({
      host: "127.0.0.1",
      path: "/ready",
      open: true,
    });
  });
});

// ---- hardening (issue 8, point 7) ----------------------------------------------------------------------

/** Each stack as Compose runs it: the main file alone, and each alternative model server layered over it. */
const STACKS: [string, ComposeFile][] = [
  ["docker-compose.yml", compose],
  ...COMPOSE_FILES.slice(1).map((file): [string, ComposeFile] => [file, mergeCompose(compose, loadCompose(file))]),
];

/** Capabilities a service may add back after dropping ALL, and why. Nothing else gets any. */
const CAPABILITIES: Record<string, string[]> = {
  // The entrypoint runs as root, hands the data and socket directories to the postgres user and drops to it.
  postgres: ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID"],
  // docker/compose.scale.yml: the caddy binary carries the file capability cap_net_bind_service, and the
  // kernel refuses to execute it unless that capability is in the bounding set (tried: "operation not
  // permitted" without it). Caddy listens above 1024 and needs it for nothing else.
  proxy: ["NET_BIND_SERVICE"],
};

/** Services whose root filesystem stays writable, per stack, each set `read_only: false` explicitly. */
const WRITABLE_ROOT: Record<string, string> = {
  // vLLM, PyTorch and Triton write compile caches and usage stats in several places outside the volume,
  // varying between versions, and no GPU is available here to list them (docs/deploy.md, "Hardening").
  "docker/compose.vllm.yml model": "vLLM's caches",
};

/** What each read-only service of the main stack needs writable besides its volumes. */
const TMPFS: Record<string, string[]> = {
  postgres: ["/var/run/postgresql", "/tmp"],
  // psql writes nothing when it runs a file.
  "db-setup": [],
  todos: ["/tmp"],
  decider: ["/tmp"],
  // llama.cpp writes only to LLAMA_CACHE (the model-cache volume).
  model: [],
};

describe("hardening: every service of every stack", () => {
  it.each(STACKS)("%s: drops every capability, adding back only the listed ones", (_file, stack) => {
    for (const [name, svc] of Object.entries(stack.services)) {
      expect({ name, cap_drop: svc.cap_drop, cap_add: [...(svc.cap_add ?? [])].sort() }).toStrictEqual({
        name,
        cap_drop: ["ALL"],
        cap_add: CAPABILITIES[name] ?? [],
      });
    }
  });

  it.each(STACKS)("%s: cannot gain privileges (no-new-privileges)", (_file, stack) => {
    for (const [name, svc] of Object.entries(stack.services)) {
      expect({ name, security_opt: svc.security_opt }).toStrictEqual({
        name,
        security_opt: ["no-new-privileges:true"],
      });
    }
  });

  it.each(STACKS)("%s: runs on a read-only root filesystem unless listed as an exception", (file, stack) => {
    for (const [name, svc] of Object.entries(stack.services)) {
      const exception = WRITABLE_ROOT[`${file} ${name}`];
      expect({ name, read_only: svc.read_only }).toStrictEqual({ name, read_only: exception === undefined });
    }
  });

  it("lists only exceptions that exist, each set explicitly in its own file", () => {
    for (const key of Object.keys(WRITABLE_ROOT)) {
      const [file = "", name = ""] = key.split(" ");
      expect({ key, read_only: loadCompose(file).services[name]?.read_only }).toStrictEqual({ key, read_only: false });
    }
  });

  it("gives each read-only service of the main stack exactly the tmpfs mounts it writes to", () => {
    for (const [name, svc] of Object.entries(compose.services)) {
      expect({ name, tmpfs: svc.tmpfs ?? [] }).toStrictEqual({ name, tmpfs: TMPFS[name] });
    }
  });

  it("mounts only named volumes, so `docker compose down` leaves no anonymous volume behind", () => {
    for (const [file, stack] of STACKS) {
      for (const [name, svc] of Object.entries(stack.services)) {
        for (const mount of svc.volumes ?? []) {
          const source = mount.split(":")[0] ?? "";
          expect({ file, name, mount, declared: source in (stack.volumes ?? {}) }).toStrictEqual({
            file,
            name,
            mount,
            declared: true,
          });
        }
      }
    }
  });

  it("waits a little longer than each service drains before killing it (stop_grace_period)", () => {
    // Today 10 s (the service kit's default drain) and 180 s (the decider's default LOCALDECIDER_TIMEOUT).
    for (const service of ["todos", "decider"] as const) {
      const drain = drainSeconds(service);
      const grace = durationSeconds(String(compose.services[service]?.stop_grace_period));
      // At least 5 s to spare (closing the database or the upstream queue comes after the drain), at most 60.
      const spare = grace - drain;
      expect({ service, drain, grace, enough: spare >= 5, notExcessive: spare <= 60 }).toStrictEqual({
        service,
        drain: expect.any(Number),
        grace,
        enough: true,
        notExcessive: true,
      });
    }
  });

  it("reads Compose durations", () => {
    expect(["190s", "1m30s", "20m", "1h", "500ms"].map(durationSeconds)).toStrictEqual([190, 90, 1200, 3600, 0.5]);
    expect(() => durationSeconds("190")).toThrow("not a duration");
  });
});
