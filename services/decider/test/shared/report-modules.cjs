// Preloaded (node --require) into a decider process by shared-limits.test.ts: on exit, one JSON line on
// stdout saying whether any Redis client module was loaded.
const fs = require("node:fs");
process.on("exit", () => {
  const loaded = Object.keys(require.cache).filter((file) =>
    /[\\/]node_modules[\\/](ioredis|@ioredis)[\\/]/.test(file),
  );
  fs.writeSync(1, `${JSON.stringify({ level: "info", message: "modules at exit", redis: loaded.length })}\n`);
});
