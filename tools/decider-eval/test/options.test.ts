import { parseEvalArgs } from "../src/options";

describe("parseEvalArgs", () => {
  it("fills the documented defaults and takes the API key from the environment", () => {
    expect(parseEvalArgs(["--data", "d.jsonl"], { LOCALDECIDER_API_KEY: "k" })).toStrictEqual({
      help: false,
      quiet: false,
      options: {
        data: "d.jsonl",
        url: "http://127.0.0.1:8080",
        apiKey: "k",
        model: "localdecider",
        out: "eval-out",
        concurrency: 4,
        timeoutSeconds: 300,
        retries: 2,
        bootstrap: 1000,
        seed: 1,
        fit: false,
        holdout: 0.3,
        minPerName: 50,
        calibrationOut: undefined,
        charts: true,
      },
    });
  });

  it("refuses values out of bounds naming the option", () => {
    expect(() => parseEvalArgs(["--data", "d", "--concurrency", "0"], {})).toThrow("--concurrency: Too small");
    expect(() => parseEvalArgs(["--data", "d", "--holdout", "1"], {})).toThrow("--holdout: Too big");
    expect(() => parseEvalArgs(["--data", "d", "--url", "ftp://x"], {})).toThrow(
      "--url must be an http:// or https:// URL",
    );
    expect(() => parseEvalArgs([], {})).toThrow("--data <file.jsonl> is required");
    expect(() => parseEvalArgs(["--data", "d", "--frobnicate"], {})).toThrow(/Unknown option '--frobnicate'/);
  });
});
