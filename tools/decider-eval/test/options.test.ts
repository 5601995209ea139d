import { join } from "node:path";
import { parseEvalArgs } from "../src/options";

describe("parseEvalArgs", () => {
  it("fills the documented defaults and takes the API key from the environment", () => {
    expect(
      parseEvalArgs(["--data", "d.jsonl"], { LOCALDECIDER_API_KEY: "k", INIT_CWD: "/home/user/here" }),
    ).toStrictEqual({
      help: false,
      quiet: false,
      options: {
        data: "/home/user/here/d.jsonl",
        url: "http://127.0.0.1:8080",
        apiKey: "k",
        model: "localdecider",
        out: "/home/user/here/eval-out",
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

  it("reads relative paths from where the command was run (INIT_CWD, which pnpm sets), else the working directory", () => {
    const args = ["--data", "d.jsonl", "--out", "o", "--calibration-out", "../c.json"];
    const fromPnpm = parseEvalArgs(args, { INIT_CWD: "/u/project" });
    expect("options" in fromPnpm && fromPnpm.options).toMatchObject({
      data: "/u/project/d.jsonl",
      out: "/u/project/o",
      calibrationOut: "/u/c.json",
    });
    const plain = parseEvalArgs([...args, "--data", "/abs/d.jsonl"], {});
    expect("options" in plain && plain.options).toMatchObject({
      data: "/abs/d.jsonl",
      out: join(process.cwd(), "o"),
      calibrationOut: join(process.cwd(), "..", "c.json"),
    });
  });

  it("asks for the version with --version, whatever else is given", () => {
    expect(parseEvalArgs(["--version"], {})).toStrictEqual({ help: false, version: true });
    expect(parseEvalArgs(["--data", "d", "--version"], {})).toStrictEqual({ help: false, version: true });
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
