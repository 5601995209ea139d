import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { spawnTracked } from "@localdecider/test-env/processes";
import { redisProgramsFromEnv, type StartedRedis, startRedis } from "@localdecider/test-env/redis";
import Redis from "ioredis";
import { stopProcess } from "../engine/backends";
import { FakeUpstream } from "../fake-upstream/server";
import { TEST_REDIS, waitFor } from "../helpers";

export { freePort } from "../engine/backends";
export { TEST_REDIS } from "../helpers";

const MAIN = path.join(__dirname, "..", "..", "dist", "main.js");

/**
 * The built service with this environment, for a start that must fail: its exit code and its stderr (trimmed),
 * where it says why.
 */
export function startFailing(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const child = spawnTracked(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH, LOCALDECIDER_PORT: "0", ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (c: Buffer) => {
    stderr += c.toString();
  });
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, stderr: stderr.trim() })));
}

/** The built service (`dist/main.js`, as `pnpm start` runs it) in server mode, in a process of its own. */
export class DeciderProcess {
  url = "";
  readonly lines: Record<string, unknown>[] = [];
  stderr = "";
  private child: ChildProcess | undefined;

  constructor(
    private readonly env: Record<string, string>,
    private readonly nodeArgs: string[] = [],
  ) {}

  async start(): Promise<this> {
    if (!fs.existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`pnpm build\` first`);
    const child = spawnTracked(process.execPath, [...this.nodeArgs, MAIN], {
      env: { PATH: process.env.PATH, LOCALDECIDER_PORT: "0", LOG_LEVEL: "info", ...this.env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.child = child;
    let partial = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      const text = partial + chunk.toString("utf8");
      const lines = text.split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) if (line.trim() !== "") this.lines.push(JSON.parse(line) as Record<string, unknown>);
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      this.stderr += chunk.toString("utf8");
    });
    await waitFor(
      () => this.lines.some((l) => l.message === "decider listening") || child.exitCode !== null,
      "the decider listening",
    );
    const listening = this.lines.find((l) => l.message === "decider listening");
    if (listening === undefined) throw new Error(`the decider exited: ${this.stderr}`);
    this.url = `http://127.0.0.1:${String(listening.port)}`;
    return this;
  }

  /** SIGKILL: no shutdown, no release; what it holds in Redis must expire. */
  async kill(): Promise<void> {
    if (this.child !== undefined) await stopProcess(this.child, "SIGKILL");
  }

  async stop(): Promise<void> {
    if (this.child !== undefined) await stopProcess(this.child);
  }
}

/**
 * A redis-server of the test's own on a loopback port, keeping nothing on disk (the shared one is untouched):
 * the program the global setup found (the machine's, or Debian's packages; test/setup/redis.ts).
 */
/**
 * For the describe block that calls it: a fake chat server (vLLM flavour, model `test-model`) for the whole
 * block, and `start(env)`, a built decider process in front of it with `env` on top; every process started
 * and the fake are stopped after the block.
 */
export function processesInFrontOfFake(): (env: Record<string, string>) => Promise<DeciderProcess> {
  let fake: FakeUpstream;
  let upstream: string;
  const deciders: DeciderProcess[] = [];
  beforeAll(async () => {
    fake = new FakeUpstream({ flavour: "vllm", models: ["test-model"] });
    upstream = await fake.start();
  });
  afterAll(async () => {
    await Promise.all(deciders.map((d) => d.stop()));
    await fake.stop();
  });
  return async (env) => {
    const decider = new DeciderProcess({
      LOCALDECIDER_UPSTREAM: upstream,
      LOCALDECIDER_UPSTREAM_MODEL: "test-model",
      ...env,
    });
    deciders.push(decider);
    return decider.start();
  };
}

export class OwnRedis {
  private started: StartedRedis | undefined;
  constructor(readonly port: number) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    this.started = await startRedis(redisProgramsFromEnv(), { port: this.port });
  }

  async stop(): Promise<void> {
    await this.started?.stop();
  }
}

/** A key prefix of its own for each test, so tests never share state in one Redis. */
export const testPrefix = () => `localdecider-test:${randomUUID()}:`;

export interface Reply {
  status: number;
  body: { code?: string; error?: string; answers?: Record<string, unknown> };
  retryAfter: string | null;
}

/** One decision of one yes/no question, over a real connection. */
export async function decide(url: string, question = "q"): Promise<Reply> {
  const res = await fetch(`${url}/v1/systemone`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "localdecider",
      state: "s",
      questions: { [question]: { type: "noul", instructions: "Is it?" } },
    }),
  });
  return {
    status: res.status,
    body: (await res.json()) as Reply["body"],
    retryAfter: res.headers.get("retry-after"),
  };
}

export interface ReadyBody {
  code?: string;
  error?: string;
  servers?: { server: string; state: string; reason?: string }[];
}

export async function readyOf(url: string): Promise<{ status: number; body: ReadyBody }> {
  const res = await fetch(`${url}/ready`);
  return { status: res.status, body: (await res.json()) as ReadyBody };
}

/**
 * Waits until every replica's /ready answers 200: a replica admits nothing before its first heartbeat has
 * reached Redis, which on a loaded machine may come after it listens.
 */
export async function allReady(deciders: DeciderProcess[]): Promise<DeciderProcess[]> {
  for (const d of deciders) {
    let status = 0;
    for (let i = 0; i < 200 && status !== 200; i++) {
      status = (await readyOf(d.url)).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 50));
    }
    expect(status).toBe(200);
  }
  return deciders;
}

/** The replicas' lease in these tests: short, so that a killed one's reservations go quickly. */
export const LEASE_MS = 1500;

/** A replica's environment: one or several model servers, the shared Redis under `prefix`, the limits. */
export function env(upstream: string, redis: string, prefix: string, limits: { inflight: number; queue: number }) {
  return {
    LOCALDECIDER_UPSTREAM: upstream,
    LOCALDECIDER_UPSTREAM_MODEL: "test-model",
    LOCALDECIDER_REDIS_URL: redis,
    LOCALDECIDER_REDIS_PREFIX: prefix,
    LOCALDECIDER_REDIS_LEASE_MS: String(LEASE_MS),
    LOCALDECIDER_MAX_INFLIGHT: String(limits.inflight),
    LOCALDECIDER_MAX_QUEUE: String(limits.queue),
    LOCALDECIDER_QUESTIONS_PER_CALL: "1",
  };
}

/** Sends `count` decisions at once, spread over the replicas; resolves each as it answers. */
export function burst(replicas: { url: string }[], count: number, tag: string): Promise<Reply>[] {
  return Array.from({ length: count }, (_, i) => decide(replicas[i % replicas.length]?.url ?? "", `${tag}${i}`));
}

/** Keeps each reply in the returned list as soon as it answers. */
export function track(replies: Promise<Reply>[]): Reply[] {
  const answered: Reply[] = [];
  for (const r of replies) void r.then((reply) => answered.push(reply));
  return answered;
}

/** What every replica under `prefix` holds in that Redis: calls queued, and slots running on any server. */
export async function sharedTotals(url: string, prefix: string): Promise<{ queued: number; running: number }> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    const sum = async (key: string) => (await redis.hvals(key)).map(Number).reduce((a, b) => a + b, 0);
    return { queued: await sum(`${prefix}queued`), running: await sum(`${prefix}running`) };
  } finally {
    redis.disconnect();
  }
}

/** The slot numbers Redis holds as pinned under a prefix: `<server> <slot>`, sorted. */
export async function sharedPins(url: string, prefix: string): Promise<string[]> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    return (await redis.hkeys(`${prefix}pins`)).sort();
  } finally {
    redis.disconnect();
  }
}

/** `count` replicas with the same environment (env()), each ready to admit work. */
export async function startReplicas(
  count: number,
  upstream: string,
  prefix: string,
  limits: { inflight: number; queue: number },
): Promise<DeciderProcess[]> {
  const started = await Promise.all(
    Array.from({ length: count }, () => new DeciderProcess(env(upstream, TEST_REDIS, prefix, limits)).start()),
  );
  return allReady(started);
}
