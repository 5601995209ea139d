/**
 * The decider's layers, kept by `pnpm run lint` (dependency-cruiser): arrows run one way, from the entry
 * points (main.ts, app.ts, routes/) through the use case (decide/) down to what it stands on: the model
 * behind its port (upstream/, the embedded engine in engine/), the limits (limits/), calibration, and the
 * plain modules at the bottom (errors.ts, models.ts, observer.ts, version.ts). An import against them fails.
 */
const src = "^src/";

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment: "A cycle ties its modules into one: none may be understood, tested or replaced alone.",
      from: { path: src },
      to: { circular: true },
    },
    {
      name: "nothing-imports-main",
      severity: "error",
      comment: "main.ts wires and starts the service; nothing builds on it.",
      from: { path: src },
      to: { path: `${src}main\\.ts$` },
    },
    {
      name: "entry-points-stay-on-top",
      severity: "error",
      comment: "The use case and what it stands on know nothing of HTTP routes or of how the app is built.",
      from: { path: `${src}(decide|upstream|engine|limits|calibration)/` },
      to: { path: `${src}(routes/|app\\.ts|backend\\.ts|auth\\.ts|metrics\\.ts)` },
    },
    {
      name: "use-case-above-its-parts",
      severity: "error",
      comment:
        "decide/ orchestrates upstream/, limits/ and calibration/; they never reach back up (the upstream port's types live in upstream/types.ts for both).",
      from: { path: `${src}(upstream|engine|limits|calibration)/` },
      to: { path: `${src}decide/` },
    },
    {
      name: "model-behind-its-port",
      severity: "error",
      comment: "The use case talks to a model through the upstream port only, never to the embedded engine itself.",
      from: { path: `${src}decide/` },
      to: { path: `${src}engine/` },
    },
    {
      name: "adapters-do-not-know-each-other",
      severity: "error",
      comment: "The model servers' adapters (upstream/) and the embedded engine (engine/) meet only in backend.ts.",
      from: { path: `${src}upstream/` },
      to: { path: `${src}engine/` },
    },
    {
      name: "limits-stand-alone",
      severity: "error",
      comment: "limits/ is the concurrency policy: it depends on nothing else of the service.",
      from: { path: `${src}limits/` },
      to: { path: src, pathNot: `${src}limits/` },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    parser: "swc",
    exclude: { path: "(^|/)(dist|node_modules)/" },
  },
};
