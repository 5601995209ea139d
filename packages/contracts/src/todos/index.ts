// `@localdecider/contracts/todos`: the todos' schemas, routes and typed client. It loads the shared core (the
// root export), never the decider's contracts.
export * from "./client";
export * from "./routes";
export * from "./schemas";
