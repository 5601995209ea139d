import { MACHINE_BROWSERS, planChromium } from "../src/chromium";

const nothing = () => false;
const only = (file: string) => (candidate: string) => candidate === file;

describe("planChromium", () => {
  it("uses the machine's browser first, in the listed order", () => {
    const plan = planChromium({
      setting: undefined,
      platform: "linux",
      arch: "x64",
      exists: only("/usr/bin/google-chrome"),
    });
    expect(plan).toEqual({ action: "use", path: "/usr/bin/google-chrome", source: "machine" });
    const chromiumFirst = planChromium({ setting: "auto", platform: "linux", arch: "x64", exists: () => true });
    expect(chromiumFirst).toEqual({ action: "use", path: "/usr/bin/chromium", source: "machine" });
  });

  it("falls back to the npm Chromium on Linux x64 when the machine has none", () => {
    expect(planChromium({ setting: undefined, platform: "linux", arch: "x64", exists: nothing })).toEqual({
      action: "npm",
    });
  });

  it("uses the npm Chromium when CHROMIUM_PATH=npm, even beside the machine's", () => {
    expect(planChromium({ setting: "npm", platform: "linux", arch: "x64", exists: () => true })).toEqual({
      action: "npm",
    });
  });

  it("uses CHROMIUM_PATH when it names a file, and refuses one that does not exist", () => {
    const path = "/opt/chrome/chrome";
    expect(planChromium({ setting: path, platform: "linux", arch: "x64", exists: only(path) })).toEqual({
      action: "use",
      path,
      source: "CHROMIUM_PATH",
    });
    expect(planChromium({ setting: path, platform: "linux", arch: "x64", exists: nothing })).toEqual({
      action: "error",
      message: "CHROMIUM_PATH=/opt/chrome/chrome: no such file",
    });
  });

  it("says what to do on a platform without the npm fallback (macOS, Windows, Linux arm64)", () => {
    for (const [platform, arch] of [
      ["darwin", "arm64"],
      ["win32", "x64"],
      ["linux", "arm64"],
    ] as const) {
      const plan = planChromium({ setting: undefined, platform, arch, exists: nothing });
      expect(plan.action).toBe("error");
      expect(plan.action === "error" && plan.message).toContain("install Google Chrome, or set CHROMIUM_PATH");
    }
    const mac = planChromium({
      setting: undefined,
      platform: "darwin",
      arch: "arm64",
      exists: only(MACHINE_BROWSERS.darwin?.[0] ?? ""),
    });
    expect(mac).toMatchObject({ action: "use", source: "machine" });
  });
});
