// `@localdecider/contracts/decider`: the decider's schemas, routes, calibration file and typed client. It
// loads the shared core (the root export), never the todos' contracts.
export * from "./calibration";
export * from "./client";
export * from "./decisions";
export * from "./routes";
export * from "./schemas";
