import { existsSync } from "node:fs";
import { type CaddyDirective, findDirective, parseCaddyfile } from "../src/caddyfile";
import { drainSeconds } from "../src/drain";
import {
  type ComposeService,
  durationSeconds,
  interpolate,
  interpolations,
  isOneShot,
  loadCompose,
  mergeCompose,
  RESET,
  readRepoFile,
  repoPath,
} from "../src/repo";

// docker/compose.scale.yml as Compose runs it: merged over the main file. Hardening, secrets, pins and
// .env.example are checked for every stack in compose.test.ts and env.test.ts; this file checks what
// scaling out adds.
const main = loadCompose("docker-compose.yml");
const override = loadCompose("docker/compose.scale.yml");
const stack = mergeCompose(main, override);
/** An image pinned by tag, optionally also by digest (`name:tag@sha256:...`, see docs/deploy.md). */
const DIGEST = "(@sha256:[0-9a-f]{64})?";

function service(name: string): ComposeService {
  const found = stack.services[name];
  if (found === undefined) throw new Error(`the scaled-out stack has no service "${name}"`);
  return found;
}

/** `${NAME:-default}` → its default, as compose fills it in when .env leaves NAME unset. */
function composeDefault(text: string): string {
  return text.replace(/\$\{[A-Z_]+:-([^}]*)\}/g, "$1");
}

function caddyfile(env: Record<string, string>) {
  return parseCaddyfile(readRepoFile("docker", "Caddyfile"), env);
}

/** What a site's reverse_proxy sends to: `dynamic a <name> <port>`. */
function dynamicUpstream(site: CaddyDirective[] | undefined): string[] {
  const proxy = findDirective(site ?? [], "reverse_proxy");
  return findDirective(proxy?.block ?? [], "dynamic")?.tokens.slice(1) ?? [];
}

describe("Compose's !reset, as the checks read it", () => {
  it("drops the main file's value instead of merging the override's into it", () => {
    expect(override.services.todos?.ports).toBe(RESET);
    const merged = mergeCompose(
      { services: { a: { ports: ["1:1"], cap_drop: ["ALL"] } } },
      { services: { a: { ports: RESET as unknown as string[] } } },
    );
    expect(merged.services.a).toStrictEqual({ cap_drop: ["ALL"] });
  });
});

describe("docker/compose.scale.yml over docker-compose.yml", () => {
  it("adds a second model server, Redis and the proxy to the main stack's services", () => {
    expect(Object.keys(stack.services).sort()).toStrictEqual(
      ["postgres", "db-setup", "todos", "model", "decider", "model-b", "redis", "proxy"].sort(),
    );
  });

  it("gives every long-running service a healthcheck", () => {
    for (const [name, svc] of Object.entries(stack.services).filter(([, svc]) => !isOneShot(svc))) {
      const test = svc.healthcheck?.test;
      expect({ name, test: Array.isArray(test) && test.length > 1 }).toStrictEqual({ name, test: true });
    }
  });

  it("runs two replicas of todos and of the decider, which publish nothing", () => {
    for (const name of ["todos", "decider"]) {
      expect({ name, replicas: service(name).deploy?.replicas, ports: service(name).ports }).toStrictEqual({
        name,
        replicas: 2,
        ports: undefined,
      });
    }
  });

  it("publishes only the proxy, on 127.0.0.1, on the ports the services have in the main file", () => {
    const published = Object.entries(stack.services).filter(([, svc]) => svc.ports !== undefined);
    expect(published.map(([name]) => name)).toStrictEqual(["proxy"]);
    expect([...(service("proxy").ports ?? [])].sort()).toStrictEqual(
      [...(main.services.todos?.ports ?? []), ...(main.services.decider?.ports ?? [])].sort(),
    );
    for (const port of service("proxy").ports ?? []) expect(port).toMatch(/^127\.0\.0\.1:/);
  });

  it("makes model-b the main file's model server but for waiting on it (same image, arguments, hardening)", () => {
    const { depends_on, ...rest } = service("model-b");
    expect(depends_on).toStrictEqual({ model: { condition: "service_healthy" } });
    expect(rest).toStrictEqual(main.services.model);
  });

  it("points every decider replica at each model server once, and at the Redis service", () => {
    const decider = service("decider");
    const servers = Object.entries(stack.services)
      .filter(([, svc]) => svc.image?.startsWith("ghcr.io/ggml-org/llama.cpp:"))
      .map(([name, svc]) => `http://${name}:${svc.command?.[(svc.command?.indexOf("--port") ?? -2) + 1]}`);
    expect(servers).toStrictEqual(["http://model:8081", "http://model-b:8081"]);
    expect(String(decider.environment?.LOCALDECIDER_UPSTREAM).split(",")).toStrictEqual(servers);
    expect(interpolate(String(decider.environment?.LOCALDECIDER_REDIS_URL), { REDIS_PASSWORD: "pw" })).toBe(
      "redis://:pw@redis:6379",
    );
    expect(decider.depends_on).toStrictEqual({
      model: { condition: "service_healthy" },
      "model-b": { condition: "service_started" },
      redis: { condition: "service_healthy" },
    });
  });
});

describe("Redis of the scaled-out stack", () => {
  const redis = service("redis");
  /** The options redis-server gets: what follows `redis-server` ($0 of the sh -c script) in the command. */
  const options = (redis.command ?? []).slice((redis.command ?? []).indexOf("redis-server") + 1);

  it("runs a pinned Redis as its own user, unpublished", () => {
    expect(redis.image).toMatch(new RegExp(`^redis:\\d+\\.\\d+\\.\\d+(-alpine)?${DIGEST}$`));
    // The image's entrypoint chowns /data and switches user only when started as root.
    expect(redis.user).toBe("redis");
    expect(redis.ports).toBeUndefined();
  });

  it("keeps nothing on disk and refuses writes rather than evict a count when full", () => {
    const args = options.join(" ");
    expect(args).toContain("--save  --appendonly no");
    expect(args).toContain("--maxmemory-policy noeviction");
    expect(redis.volumes).toBeUndefined();
    expect(redis.read_only).toBe(true);
  });

  it("requires REDIS_PASSWORD from .env, with no default, for Redis and for the deciders' URL alike", () => {
    const required = /^\$\{REDIS_PASSWORD:\?set REDIS_PASSWORD in \.env[^}]*\}$/;
    expect(redis.environment?.REDIS_PASSWORD).toMatch(required);
    const url = String(service("decider").environment?.LOCALDECIDER_REDIS_URL);
    expect(url.replace(/\$\{[^}]*\}/, "<password>")).toBe("redis://:<password>@redis:6379");
    expect(interpolations(url)).toStrictEqual([{ name: "REDIS_PASSWORD", fallback: undefined, required: true }]);
    // As compose fills them in: without the variable (or with it empty) the stack does not start.
    for (const env of [{}, { REDIS_PASSWORD: "" }]) {
      expect(() => interpolate(url, env)).toThrow(
        "required variable REDIS_PASSWORD is missing a value: set REDIS_PASSWORD in .env",
      );
      expect(() => interpolate(String(redis.environment?.REDIS_PASSWORD), env)).toThrow("REDIS_PASSWORD");
    }
  });

  it("gives redis-server the password on its standard input, in none of its arguments, and keeps protected mode", () => {
    const password = "a-password-from-env";
    const command = (redis.command ?? []).map((arg) => interpolate(arg, { REDIS_PASSWORD: password }));
    expect(command.slice(0, 2)).toStrictEqual(["sh", "-c"]);
    // The script execs redis-server with its configuration on stdin (`-`) and the listed options after it.
    expect(command[2]).toBe('exec redis-server - "$@" <<EOF\nrequirepass "$REDIS_PASSWORD"\nEOF');
    expect(command[3]).toBe("redis-server");
    expect(command.filter((arg) => arg.includes(password))).toStrictEqual([]);
    expect(options.join(" ")).toContain("--protected-mode yes");
    expect(options.join(" ")).not.toContain("requirepass");
  });

  it("probes with an authenticated PING, the password from the environment (REDISCLI_AUTH), not the command line", () => {
    expect(redis.healthcheck?.test).toStrictEqual([
      "CMD-SHELL",
      'REDISCLI_AUTH="$$REDIS_PASSWORD" redis-cli ping | grep -q PONG',
    ]);
  });
});

describe("the proxy (Caddy) and docker/Caddyfile", () => {
  const proxy = service("proxy");
  const defaults = {
    TODOS_PORT: composeDefault(String(proxy.environment?.TODOS_PORT)),
    LOCALDECIDER_PORT: composeDefault(String(proxy.environment?.LOCALDECIDER_PORT)),
  };

  it("runs a pinned Caddy, 2.11.4 or later (earlier ones do not retry a POST after a failed connection)", () => {
    const version = new RegExp(`^caddy:(\\d+)\\.(\\d+)\\.(\\d+)-alpine${DIGEST}$`).exec(proxy.image ?? "");
    const [major, minor, patch] = (version?.slice(1, 4) ?? []).map(Number) as [number, number, number];
    expect(major * 1e6 + minor * 1e3 + patch).toBeGreaterThanOrEqual(2_011_004);
  });

  it("mounts docker/Caddyfile where the image reads its configuration", () => {
    expect(proxy.configs).toStrictEqual([{ source: "caddyfile", target: "/etc/caddy/Caddyfile" }]);
    const file = stack.configs?.caddyfile?.file ?? "";
    // Relative to the project directory (the main file's), as Compose resolves it.
    expect(file).toBe("./docker/Caddyfile");
    expect(existsSync(repoPath(file))).toBe(true);
  });

  it("gives Caddy the ports it listens on, with the defaults the services have", () => {
    expect(defaults).toStrictEqual({
      TODOS_PORT: composeDefault(String(main.services.todos?.environment?.TODOS_PORT)),
      LOCALDECIDER_PORT: composeDefault(String(main.services.decider?.environment?.LOCALDECIDER_PORT)),
    });
  });

  it.each([
    ["the default ports", defaults],
    ["other ports from .env", { TODOS_PORT: "3100", LOCALDECIDER_PORT: "8180" }],
  ])("routes each service's port to that service's replicas, on the same port, with %s", (_label, env) => {
    const sites = caddyfile(env).sites;
    expect(dynamicUpstream(sites.get(`:${env.TODOS_PORT}`))).toStrictEqual(["a", "todos", env.TODOS_PORT]);
    expect(dynamicUpstream(sites.get(`:${env.LOCALDECIDER_PORT}`))).toStrictEqual([
      "a",
      "decider",
      env.LOCALDECIDER_PORT,
    ]);
  });

  it("skips an unreachable replica and retries on another within bounded time", () => {
    const sites = caddyfile(defaults).sites;
    for (const port of [defaults.TODOS_PORT, defaults.LOCALDECIDER_PORT]) {
      const proxyBlock = findDirective(sites.get(`:${port}`) ?? [], "reverse_proxy")?.block ?? [];
      const setting = (name: string) => findDirective(proxyBlock, name)?.tokens.slice(1);
      expect({ port, refresh: setting("refresh"), lb: setting("lb_policy") }).toStrictEqual({
        port,
        refresh: ["5s"],
        lb: ["least_conn"],
      });
      const seconds = (name: string) => durationSeconds(setting(name)?.[0] ?? "");
      // A dial that cannot succeed gives up before the request's retry window is spent.
      expect(seconds("dial_timeout")).toBeLessThan(seconds("lb_try_duration"));
      expect(seconds("fail_duration")).toBeGreaterThan(0);
      // Only failed connections are retried: no status makes a replica "unhealthy" (a decider 503 is an answer).
      expect(setting("unhealthy_status")).toBeUndefined();
    }
  });

  it("passes each client's Host on as it came (no header_up), and the replicas keep the main file's Host check", () => {
    // Clients reach the proxy on the published 127.0.0.1 ports, a loopback name every replica answers; a name
    // the operator puts in front goes into .env's *_ALLOWED_HOSTS, which the replicas get from the main file.
    const sites = caddyfile(defaults).sites;
    for (const port of [defaults.TODOS_PORT, defaults.LOCALDECIDER_PORT]) {
      const proxyBlock = findDirective(sites.get(`:${port}`) ?? [], "reverse_proxy")?.block ?? [];
      const rewrites = ["header_up", "headers"].flatMap((name) => findDirective(proxyBlock, name)?.tokens ?? []);
      expect({ port, rewrites }).toStrictEqual({ port, rewrites: [] });
    }
    for (const [name, variable] of [
      ["todos", "TODOS_ALLOWED_HOSTS"],
      ["decider", "LOCALDECIDER_ALLOWED_HOSTS"],
    ] as const) {
      expect({ name, value: service(name).environment?.[variable] }).toStrictEqual({
        name,
        value: main.services[name]?.environment?.[variable],
      });
    }
  });

  it("answers its healthcheck from a site of its own on the container's loopback", () => {
    const url = /http:\/\/127\.0\.0\.1:(\d+)\//.exec(String(proxy.healthcheck?.test));
    const site = caddyfile(defaults).sites.get(`:${url?.[1]}`) ?? [];
    expect(findDirective(site, "bind")?.tokens).toStrictEqual(["bind", "127.0.0.1"]);
    expect(findDirective(site, "respond")).toBeDefined();
  });

  it("serves plain HTTP and keeps its admin API on loopback", () => {
    const global = caddyfile(defaults).global;
    expect(findDirective(global, "auto_https")?.tokens).toStrictEqual(["auto_https", "off"]);
    expect(findDirective(global, "admin")?.tokens[1]).toMatch(/^127\.0\.0\.1:/);
  });

  it("lets requests finish after SIGTERM for longer than a decision may take, and compose waits longer still", () => {
    const grace = durationSeconds(findDirective(caddyfile(defaults).global, "grace_period")?.tokens[1] ?? "");
    const decider = drainSeconds("decider");
    const stop = durationSeconds(String(proxy.stop_grace_period));
    expect({ graceOverDrain: grace - decider, stopOverGrace: stop - grace }).toStrictEqual({
      graceOverDrain: 5,
      stopOverGrace: 10,
    });
  });

  it("runs as nobody, writing only to tmpfs mounts at the image's Caddy directories", () => {
    expect(proxy.user).toBe("65534:65534");
    expect(proxy.tmpfs).toStrictEqual(["/config/caddy", "/data/caddy"]);
  });
});

describe("docs/deploy.md, Scaling out", () => {
  const docs = readRepoFile("docs", "deploy.md");

  it("shows the command that layers the override and names the pinned images it adds", () => {
    const command = "docker compose -f docker-compose.yml -f docker/compose.scale.yml up --build -d";
    const named = ["proxy", "redis"].map((name) => [name, docs.includes(`\`${service(name).image}\``)]);
    expect({ command: docs.includes(command), named }).toStrictEqual({
      command: true,
      named: [
        ["proxy", true],
        ["redis", true],
      ],
    });
  });
});
