// `@localdecider/contracts`: the shared core, and nothing of either service. The route contract types and
// their checks, the typed-client machinery (createClient, ApiError, ApiRequestError), the error body, the
// probes' bodies and JsonValue. Each service's own contracts are a subpath of their own:
// `@localdecider/contracts/decider` and `@localdecider/contracts/todos`, so that a process (a service's
// image) loads its own schemas only. There is no barrel of both on purpose: the easy import would then be
// the one that loads both services' schemas.
export * from "./core/client";
export * from "./core/errors";
export * from "./core/health";
export * from "./core/json";
export * from "./core/route";
