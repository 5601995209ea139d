// The tiny model's writer ships with the service (LOCALDECIDER_MODEL=demo): the tests use the same one.
export * from "../../src/engine/demo/tiny-model";
