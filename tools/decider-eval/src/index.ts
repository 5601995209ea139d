export * from "./charts";
export * from "./dataset";
export * from "./evaluate";
export * from "./fit";
export * from "./metrics";
export * from "./predictions";
export * from "./report";
export * from "./results";
