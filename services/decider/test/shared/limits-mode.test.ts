import { FakeUpstream } from "../fake-upstream/server";
import { DeciderProcess, TEST_REDIS, testPrefix } from "./processes";

/**
 * Whether the limits are shared is said, never failed on: a decider without LOCALDECIDER_REDIS_URL is ready
 * (one replica needs no Redis), and says in /ready's body and at start that it counts alone, so that a
 * deployment scaled past one replica without Redis shows why its model servers get more than their slots.
 */
describe("the decider says where its limits are counted", () => {
  let fake: FakeUpstream;
  let upstream: string;
  let decider: DeciderProcess | undefined;
  beforeAll(async () => {
    fake = new FakeUpstream();
    upstream = await fake.start();
  });
  afterEach(async () => {
    await decider?.stop();
    decider = undefined;
  });
  afterAll(async () => {
    await fake.stop();
  });

  const env = () => ({ LOCALDECIDER_UPSTREAM: upstream, LOCALDECIDER_UPSTREAM_MODEL: "test-model" });
  const ready = async (url: string) => {
    const res = await fetch(`${url}/ready`);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const notShared = (d: DeciderProcess) =>
    d.lines.filter((l) => l.limits === "this process" && l.message !== "decider listening");

  it("without LOCALDECIDER_REDIS_URL: /ready is 200 with limits 'this process', and the start-up log says so on a line of its own", async () => {
    decider = await new DeciderProcess(env()).start();
    expect(await ready(decider.url)).toStrictEqual({
      status: 200,
      body: { status: "ready", upstream: "server 1", model: "test-model", protocol: "chat", limits: "this process" },
    });
    expect(notShared(decider)).toStrictEqual([
      expect.objectContaining({
        level: "info",
        message:
          "limits are this process's own, not shared: run one replica, or set LOCALDECIDER_REDIS_URL for several",
        maxInflight: 2,
        maxQueue: 256,
      }),
    ]);
  });

  it("with LOCALDECIDER_REDIS_URL: /ready says 'shared through Redis' and the log has no such line", async () => {
    decider = await new DeciderProcess({
      ...env(),
      LOCALDECIDER_REDIS_URL: TEST_REDIS,
      LOCALDECIDER_REDIS_PREFIX: testPrefix(),
    }).start();
    let answer = await ready(decider.url);
    // Ready once its first heartbeat reached Redis (the shared limits admit nothing before).
    for (let i = 0; answer.status !== 200 && i < 100; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      answer = await ready(decider.url);
    }
    expect(answer).toStrictEqual({
      status: 200,
      body: {
        status: "ready",
        upstream: "server 1",
        model: "test-model",
        protocol: "chat",
        limits: "shared through Redis",
      },
    });
    expect(notShared(decider)).toStrictEqual([]);
    expect(decider.lines.find((l) => l.message === "decider listening")?.limits).toBe("shared through Redis");
  });
});
