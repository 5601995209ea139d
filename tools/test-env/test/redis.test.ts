import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import {
  ensureRedis,
  ensureRedisPrograms,
  exportRedisPrograms,
  libraryDepends,
  onPath,
  redisAnswers,
  redisProgramsFromEnv,
  startRedis,
} from "../src/redis";

const run = promisify(execFile);

/** A real TCP server on loopback that answers each connection's first bytes with `reply` (or hangs up). */
async function serverReplying(reply: string | null): Promise<{ port: number; close(): Promise<void> }> {
  const server = net.createServer((socket) => {
    socket.on("error", () => undefined);
    socket.once("data", () => (reply === null ? socket.destroy() : socket.write(reply)));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function closedPort(): Promise<number> {
  const server = await serverReplying(null);
  await server.close();
  return server.port;
}

describe("redisAnswers", () => {
  it("says no for a closed port, a server that hangs up, one that wants a password, and another protocol", async () => {
    const servers = await Promise.all(
      [null, "-NOAUTH Authentication required.\r\n", "HTTP/1.1 400 Bad Request\r\n\r\n"].map(serverReplying),
    );
    try {
      expect(await redisAnswers("127.0.0.1", await closedPort())).toBe(false);
      for (const s of servers) expect(await redisAnswers("127.0.0.1", s.port)).toBe(false);
    } finally {
      await Promise.all(servers.map((s) => s.close()));
    }
  });

  it("says yes for a server that answers PING with PONG, even in two pieces", async () => {
    const server = net.createServer((socket) => {
      socket.once("data", () => {
        socket.write("+PO");
        setImmediate(() => socket.write("NG\r\n"));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      expect(await redisAnswers("127.0.0.1", (server.address() as net.AddressInfo).port)).toBe(true);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe("libraryDepends", () => {
  it("keeps a package's library dependencies, without the C library, systemd's, virtual names or non-libraries", () => {
    const output = [
      "redis-tools",
      "  Depends: adduser",
      "  Depends: libatomic1",
      "  Depends: libc6",
      "  Depends: libjemalloc2",
      " |Depends: liblzf1",
      "  Depends: libssl3",
      "  Depends: libsystemd0",
      "    libelogind0",
      "  Depends: <libfoo-virtual>",
      "  Breaks: redis-server",
      "  Suggests: ruby-redis",
    ].join("\n");
    expect(libraryDepends(output)).toStrictEqual(["libatomic1", "libjemalloc2", "liblzf1", "libssl3"]);
  });
});

describe("onPath", () => {
  it("finds the folder holding a program, and nothing for one that is not there", () => {
    expect(onPath("sh", "/nonexistent:/bin:/usr/bin")).toMatch(/^\/(usr\/)?bin$/);
    expect(onPath("no-such-program-here", "/bin:/usr/bin")).toBeUndefined();
  });
});

describe("the programs handed from a global setup to the test files", () => {
  it("are the ones found, and the reason is given to the test that needs them when there are none", async () => {
    const env: NodeJS.ProcessEnv = {};
    expect(() => redisProgramsFromEnv(env)).toThrow(/no redis-server was prepared/);
    expect(() => redisProgramsFromEnv({ LOCALDECIDER_TEST_REDIS_PROGRAMS_PROBLEM: "install Redis" })).toThrow(
      "install Redis",
    );
    const saved = { ...process.env };
    try {
      const programs = await exportRedisPrograms({ say: () => undefined });
      expect(programs).toBeDefined();
      expect(redisProgramsFromEnv(process.env)).toStrictEqual(programs);
    } finally {
      process.env = saved;
    }
  });
});

describe("startRedis and ensureRedis", () => {
  it("start a real redis-server on a free loopback port that answers, and stop it", async () => {
    const programs = await ensureRedisPrograms({ say: () => undefined });
    const started = await startRedis(programs);
    try {
      expect(await redisAnswers("127.0.0.1", started.port)).toBe(true);
      if (programs.cli !== undefined) {
        const { stdout } = await run(programs.cli, ["-p", String(started.port), "ping"], {
          env: { ...process.env, ...programs.env },
        });
        expect(stdout.trim()).toBe("PONG");
      }
    } finally {
      await started.stop();
    }
    expect(started.child.exitCode !== null || started.child.signalCode !== null).toBe(true);
    expect(await redisAnswers("127.0.0.1", started.port)).toBe(false);
  });

  it("starts one when nothing answers at the configured address, and uses one that answers", async () => {
    const lines: string[] = [];
    const started = await ensureRedis({ url: `redis://127.0.0.1:${await closedPort()}`, say: (m) => lines.push(m) });
    try {
      expect(started.source).toBe("started");
      expect(lines.join("\n")).toMatch(/nothing answers at 127\.0\.0\.1:\d+; started /);
      const port = Number(new URL(started.url).port);
      expect(await redisAnswers("127.0.0.1", port)).toBe(true);
      const found = await ensureRedis({ url: started.url, say: () => undefined });
      expect(found).toMatchObject({ url: started.url, source: "running" });
      await found.stop(); // a server it found is left alone
      expect(await redisAnswers("127.0.0.1", port)).toBe(true);
    } finally {
      await started.stop();
    }
  });
});

// Where the machine has no redis-server (a Node-only Debian or Ubuntu machine): Debian's own packages,
// fetched with apt-get into the cache (once) and run from there. Shown here by hiding the machine's programs.
const debian = process.platform === "linux" && onPath("apt-get") !== undefined && onPath("dpkg-deb") !== undefined;
describe("without redis-server on PATH", () => {
  it("on Debian or Ubuntu, unpacks Debian's redis-tools and its libraries, and that redis-server and redis-cli run; elsewhere says what to install", async () => {
    if (!debian) {
      await expect(ensureRedisPrograms({ pathVariable: "/nonexistent" })).rejects.toThrow(/install Redis/);
      return;
    }
    // A cache of its own, so that the fetch really runs; two callers at once share one fetch (a test file's
    // tests and a global setup's run in parallel on a first run).
    const cache = await mkdtemp(path.join(tmpdir(), "test-env-redis-cache-"));
    const lines: string[] = [];
    const options = { pathVariable: "/nonexistent", cache, say: (m: string) => lines.push(m) };
    const [programs, again] = await Promise.all([ensureRedisPrograms(options), ensureRedisPrograms(options)]);
    expect(again).toStrictEqual(programs);
    expect(lines.filter((l) => l.startsWith("not on this machine: fetching Debian's redis-tools"))).toHaveLength(1);
    expect(programs.source).toBe("debian packages");
    expect(programs.server).toMatch(/debian-redis\/bin\/redis-server$/);
    expect(programs.env.LD_LIBRARY_PATH).toMatch(/debian-redis\/usr\/lib\/[a-z0-9_]+-linux-gnu/);
    const started = await startRedis(programs);
    try {
      const { stdout } = await run(String(programs.cli), ["-p", String(started.port), "ping"], {
        env: { ...process.env, ...programs.env },
      });
      expect(stdout.trim()).toBe("PONG");
    } finally {
      await started.stop();
      await rm(cache, { recursive: true, force: true });
    }
  }, 120_000);
});
