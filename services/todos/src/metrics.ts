import { createMetrics, Gauge, Histogram, type Metrics } from "@localdecider/service-kit";
import type { QueryObserver } from "./storage/repository";

/** Query latency buckets in seconds: a primary-key query takes about a millisecond; the top is past the
 * 10 s statement_timeout and near the 15 s query_timeout (POOL_SETTINGS). */
const QUERY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15];

/** What the pool gauges read, at scrape time (pg.Pool has these three). */
export interface PoolFigures {
  readonly totalCount: number;
  readonly idleCount: number;
  readonly waitingCount: number;
}

export interface TodosMetrics {
  /** The kit's registry, HTTP middleware and /metrics handler. */
  metrics: Metrics;
  /** Pass to openStorage({ onQuery }): each database operation lands in the query histogram. */
  onQuery: QueryObserver;
  /** Pass to openStorage({ onPool }): adds gauges for the Postgres pool (PGlite has no pool, so none). */
  watchPool: (pool: PoolFigures) => void;
}

/**
 * The todos service's Prometheus series on a registry of its own (one per app instance, so test apps never
 * share a global registry). Created before storage is opened, because storage reports to it.
 */
export function createTodosMetrics(): TodosMetrics {
  const metrics = createMetrics({ service: "todos" });
  const registers = [metrics.registry];
  const queries = new Histogram({
    name: "todos_db_query_duration_seconds",
    help: 'Duration of each database operation, by Prisma operation (e.g. "todoItem.findMany") and outcome (ok, error).',
    labelNames: ["operation", "outcome"] as const,
    buckets: QUERY_BUCKETS,
    registers,
  });
  let watching = false;
  return {
    metrics,
    onQuery: (operation, durationMs, ok) =>
      queries.observe({ operation, outcome: ok ? "ok" : "error" }, durationMs / 1000),
    watchPool: (pool) => {
      if (watching) return;
      watching = true;
      const gauge = (name: string, help: string, read: (p: PoolFigures) => number) =>
        new Gauge({
          name,
          help,
          registers,
          collect() {
            this.set(read(pool));
          },
        });
      gauge("todos_db_pool_connections", "Connections the Postgres pool holds (idle and in use).", (p) => p.totalCount);
      gauge("todos_db_pool_idle_connections", "Pool connections open and not in use.", (p) => p.idleCount);
      gauge(
        "todos_db_pool_waiting_requests",
        "Queries waiting for a pool connection (all 10 in use).",
        (p) => p.waitingCount,
      );
    },
  };
}
