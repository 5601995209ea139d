/**
 * The benchmark's floors, each run as its own process by bench/run.ts: `node baseline-server.js raw` (node:http
 * + pg) or `... express` (Express 5 + pg, a bare handler). Both serve the service's list and create over a
 * pg pool of the service's size with the statements Prisma sends, and no validation, logging or metrics:
 * what the service's routes cost above this is the price of its features. DATABASE_URL names the database;
 * prints `{"message":"listening","port":N}` once bound to a free loopback port.
 */
import { randomUUID } from "node:crypto";
import http from "node:http";
import express from "express";
import pg from "pg";
import { POOL_SETTINGS } from "../src/storage/open-storage";

// The list in the service's order (seq: docs/todos-paging.md), served by the same (userId, seq) index.
const LIST_SQL = `SELECT "id", "title", "completed", "createdAt", "updatedAt" FROM "public"."TodoItem"
  WHERE "userId" = $1 ORDER BY "seq" ASC`;
const CREATE_SQL = `INSERT INTO "public"."TodoItem" ("id", "userId", "title", "completed", "createdAt", "updatedAt")
  VALUES ($1, $2, $3, $4, $5, $6) RETURNING "id", "title", "completed", "createdAt", "updatedAt"`;

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: POOL_SETTINGS.max });

async function list(userId: string): Promise<unknown> {
  return { todoItems: (await pool.query(LIST_SQL, [userId])).rows };
}

async function create(userId: string, body: { title: string; completed?: boolean }): Promise<unknown> {
  const now = new Date();
  const values = [randomUUID(), userId, body.title, body.completed ?? false, now, now];
  return { success: true, todoItem: (await pool.query(CREATE_SQL, values)).rows[0] };
}

function rawServer(): http.Server {
  return http.createServer((req, res) => {
    const match = /^\/users\/([^/?]+)\/todos/.exec(req.url ?? "");
    const userId = match?.[1] === undefined ? undefined : decodeURIComponent(match[1]);
    const reply = (status: number, body: unknown) =>
      res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    const fail = () => reply(500, { error: "Internal server error" });
    if (userId === undefined) return reply(404, { error: "Not found" });
    if (req.method === "GET") return void list(userId).then((body) => reply(200, body), fail);
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      create(userId, JSON.parse(Buffer.concat(chunks).toString("utf8"))).then((body) => reply(201, body), fail);
    });
  });
}

function expressServer(): http.Server {
  const app = express();
  app.get("/users/:userId/todos", async (req, res) => {
    res.json(await list(req.params.userId));
  });
  app.post("/users/:userId/todos", express.json(), async (req, res) => {
    res.status(201).json(await create(req.params.userId, req.body));
  });
  return http.createServer(app);
}

const kind = process.argv[2];
if (kind !== "raw" && kind !== "express") throw new Error("usage: baseline-server.js raw|express");
const server = kind === "raw" ? rawServer() : expressServer();
server.listen(0, "127.0.0.1", () => {
  console.log(JSON.stringify({ message: "listening", port: (server.address() as { port: number }).port }));
});
process.on("SIGTERM", () => {
  server.close();
  server.closeAllConnections();
  void pool.end().then(() => process.exit(0));
});
