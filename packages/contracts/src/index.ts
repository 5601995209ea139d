export * from "./decider";
export * from "./errors";
export * from "./health";
export * from "./todos";
