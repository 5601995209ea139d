export * from "./access-log";
export * from "./app-error";
export * from "./config";
export * from "./error-handler";
export * from "./logger";
export * from "./metrics";
export * from "./request-context";
export * from "./serve";
