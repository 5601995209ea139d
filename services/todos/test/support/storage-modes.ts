import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { type AllowedHosts, createLogger, hostPolicy, type Logger } from "@localdecider/service-kit";
import type { Express } from "express";
import { type AppDeps, createApp } from "../../src/app";
import type { TodosAuth } from "../../src/http/auth";
import { createTodosMetrics } from "../../src/metrics";
import { openStorage, type StorageOptions } from "../../src/storage/open-storage";
import type { TodoRepository } from "../../src/storage/repository";
import { recorder, recorderFor, todosOpenApi } from "../setup/openapi-responses";
import { createTestDatabase } from "./postgres";

/** Where a storage mode keeps its data for one test file, and how to throw it away afterwards. */
export interface StorageLocation {
  options: StorageOptions;
  dispose(): Promise<void>;
}

export interface StorageMode {
  name: "postgres" | "pglite";
  locate(): Promise<StorageLocation>;
}

export const postgresMode: StorageMode = {
  name: "postgres",
  locate: async () => {
    const db = await createTestDatabase();
    return { options: { databaseUrl: db.url, dataDir: "unused" }, dispose: db.drop };
  },
};

export const pgliteMode: StorageMode = {
  name: "pglite",
  locate: async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), "todos-pglite-"));
    return { options: { dataDir }, dispose: () => rm(dataDir, { recursive: true, force: true }) };
  },
};

/** The same API suite runs once per storage mode. */
export const STORAGE_MODES: StorageMode[] = [postgresMode, pgliteMode];

export const silentLogger: Logger = createLogger({ service: "todos-test", level: "silent" });

/** The Host check main.ts wires with TODOS_ALLOWED_HOSTS unset, on 127.0.0.1, with this sign-in. */
export function defaultHosts(auth?: TodosAuth): AllowedHosts | undefined {
  return hostPolicy({ configured: undefined, listenHost: "127.0.0.1", authenticated: auth !== undefined });
}

export interface TestApp {
  app: Express;
  repository: TodoRepository;
}

/** The app as main.ts wires it (metrics fed by storage), its responses recorded for the OpenAPI check. */
export async function buildApp(options: StorageOptions): Promise<TestApp> {
  const metrics = createTodosMetrics();
  const repository = await openStorage({ ...options, onQuery: metrics.onQuery, onPool: metrics.watchPool });
  const app = createApp({
    repository,
    logger: silentLogger,
    metrics,
    allowedHosts: defaultHosts(),
    hooks: { beforeRoutes: (a) => a.use(recorder.middleware) },
  });
  return { app, repository };
}

/**
 * Another app over an open repository, e.g. with sign-in on, another item limit or another Host check (by
 * default the one main.ts wires for that sign-in); its responses are checked against the document it serves
 * itself (see setup/openapi-responses.ts).
 */
export function appWith(
  repository: TodoRepository,
  deps: Partial<Pick<AppDeps, "auth" | "allowedHosts" | "maxItemsPerUser" | "listLimits" | "corsOrigins">> = {},
): Express {
  const allowedHosts = "allowedHosts" in deps ? deps.allowedHosts : defaultHosts(deps.auth);
  const hostCheck = allowedHosts !== undefined;
  return createApp({
    repository,
    logger: silentLogger,
    auth: deps.auth,
    allowedHosts,
    ...(deps.maxItemsPerUser === undefined ? {} : { maxItemsPerUser: deps.maxItemsPerUser }),
    ...(deps.listLimits === undefined ? {} : { listLimits: deps.listLimits }),
    corsOrigins: deps.corsOrigins,
    hooks: { beforeRoutes: (a) => a.use(recorderFor(() => todosOpenApi({ auth: deps.auth, hostCheck }))) },
  });
}

/** A suite's app, with the storage options it was opened with (e.g. to reach the same database directly). */
export interface SuiteApp extends TestApp {
  options: StorageOptions;
}

/**
 * The app of the enclosing describe (or file) over `mode`: built in a beforeAll, its repository closed and its
 * storage thrown away in an afterAll. What it returns reads the app when a test runs, since it exists only once
 * the beforeAll has (a hook registered after this one may already use it).
 */
export function suiteApp(mode: StorageMode): SuiteApp {
  let location: StorageLocation | undefined;
  let built: TestApp | undefined;
  beforeAll(async () => {
    location = await mode.locate();
    built = await buildApp(location.options);
  });
  afterAll(async () => {
    await built?.repository.close();
    await location?.dispose();
  });
  const current = (): { location: StorageLocation; built: TestApp } => {
    if (location === undefined || built === undefined) {
      throw new Error(`the ${mode.name} app is not built yet: use it inside a hook or test`);
    }
    return { location, built };
  };
  return {
    get app() {
      return current().built.app;
    },
    get repository() {
      return current().built.repository;
    },
    get options() {
      return current().location.options;
    },
  };
}
