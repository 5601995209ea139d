import { liveChildren, reapChildren, spawnTracked, stopChild } from "../src/processes";

/** Whether a process with this pid exists (signal 0 checks without signalling). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !condition(); i++) await new Promise((r) => setTimeout(r, 25));
  expect(condition()).toBe(true);
}

describe("spawnTracked and reapChildren", () => {
  it("kills every child a test left running, a shell's own children with it, and forgets those that exited", async () => {
    // A shell that starts a long sleep and prints its pid: the grandchild a plain kill of the shell would orphan.
    const shell = spawnTracked("sh", ["-c", "sleep 300 & echo $!; wait"], {
      group: true,
      stdio: ["ignore", "pipe", "ignore"],
    });
    const plain = spawnTracked(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
    const done = spawnTracked(process.execPath, ["-e", "0"], { stdio: "ignore" });
    let out = "";
    shell.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
    });
    await until(() => /\d+\n/.test(out));
    await until(() => done.exitCode !== null);
    const grandchild = Number(out.trim());
    expect(alive(grandchild)).toBe(true);
    expect(liveChildren()).toStrictEqual([shell, plain]);

    const reaped = await reapChildren();
    expect(reaped).toHaveLength(2);
    expect(reaped[0]).toMatch(/^sh -c sleep 300/);
    expect(shell.signalCode).toBe("SIGKILL");
    expect(plain.signalCode).toBe("SIGKILL");
    await until(() => !alive(grandchild));
    expect(liveChildren()).toStrictEqual([]);
    expect(await reapChildren()).toStrictEqual([]);
  });

  it("stopChild sends the signal asked for and waits for the exit; a child already gone is no error", async () => {
    const child = spawnTracked(
      process.execPath,
      ["-e", "process.on('SIGTERM', () => process.exit(3)); setInterval(() => {}, 1000)"],
      {
        stdio: ["ignore", "ignore", "ignore"],
      },
    );
    await new Promise((r) => setTimeout(r, 200));
    await stopChild(child);
    expect(child.exitCode === 3 || child.signalCode === "SIGTERM").toBe(true);
    await stopChild(child);
    expect(liveChildren()).toStrictEqual([]);
  });
});
