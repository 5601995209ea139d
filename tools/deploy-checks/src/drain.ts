import { envDefault, readRepoFile, serviceSchemas } from "./repo";

/**
 * How long a service drains after SIGTERM before it exits, read from its main.ts and the service kit, so
 * that a change there shows up here: the kit's serve() waits `drainTimeoutMs` (its default when main.ts
 * passes none), and the decider passes its LOCALDECIDER_TIMEOUT.
 */
export function drainSeconds(service: "todos" | "decider"): number {
  const kitDefault = /drainTimeoutMs \?\? ([\d_]+)\)/.exec(readRepoFile("packages/service-kit/src/serve.ts"))?.[1];
  if (kitDefault === undefined) throw new Error("serve.ts no longer reads `drainTimeoutMs ?? <ms>`: update this check");
  const main = readRepoFile("services", service, "src/main.ts");
  const passed = /drainTimeoutMs: (\w+)/.exec(main)?.[1];
  if (passed === undefined) return Number(kitDefault.replace(/_/g, "")) / 1000;
  // The decider: `drainTimeoutMs: timeoutMs` with `const timeoutMs = config.LOCALDECIDER_TIMEOUT * 1000`.
  const variable = new RegExp(`const ${passed} = config\\.(\\w+) \\* 1000;`).exec(main)?.[1];
  if (variable === undefined) throw new Error(`${service}: drainTimeoutMs is no longer one config variable in seconds`);
  return Number(envDefault(serviceSchemas()[service], variable));
}
