// Shipped with the tiny model's writer (src/engine/demo/): the tests use the same one.
export * from "../../src/engine/demo/byte-level";
