import path from "node:path";
import { cacheDir, packageDir } from "../src/npm-package";

describe("the test cache", () => {
  it("is LOCALDECIDER_TEST_CACHE when set", () => {
    expect(cacheDir({ LOCALDECIDER_TEST_CACHE: "/srv/cache" }, 1000)).toBe(path.resolve("/srv/cache"));
  });

  it("is under XDG_CACHE_HOME for a user, and in /var/cache for root (whose home the postgres user cannot enter)", () => {
    expect(cacheDir({ XDG_CACHE_HOME: "/home/u/.cache" }, 1000)).toBe(path.join("/home/u/.cache", "localdecider-test"));
    expect(cacheDir({}, 0)).toBe("/var/cache/localdecider-test");
  });

  it("keeps one folder per exact package version", () => {
    expect(packageDir({ name: "@sparticuz/chromium", version: "153.0.0" }, "/c")).toBe(
      path.join("/c", "@sparticuz+chromium@153.0.0"),
    );
  });
});
