import type { SqlDriverAdapter, SqlDriverAdapterFactory } from "@prisma/driver-adapter-utils";
import { connectShared } from "../src/storage/shared-adapter";

/** A factory whose adapters count their own disposals and fail on a second one, as adapter-pg's pool.end does. */
function countingFactory() {
  const counts = { connects: 0, disposals: 0 };
  const factory = {
    provider: "postgres",
    adapterName: "counting",
    connect: async () => {
      counts.connects += 1;
      return {
        provider: "postgres",
        adapterName: "counting",
        dispose: async () => {
          counts.disposals += 1;
          if (counts.disposals > 1) throw new Error("Called end on pool more than once");
        },
      } as unknown as SqlDriverAdapter;
    },
  } as unknown as SqlDriverAdapterFactory;
  return { factory, counts };
}

describe("connectShared", () => {
  it("when the client connects, it gets the adapter already connected, never a second one", async () => {
    const { factory, counts } = countingFactory();
    const shared = await connectShared(factory);
    expect(await shared.factory.connect()).toBe(shared.adapter);
    expect(await shared.factory.connect()).toBe(shared.adapter);
    expect(counts.connects).toBe(1);
    expect(shared.factory.provider).toBe("postgres");
    expect(shared.factory.adapterName).toBe("counting");
  });

  it("when both the client ($disconnect) and the repository dispose it, the adapter is disposed once", async () => {
    const { factory, counts } = countingFactory();
    const shared = await connectShared(factory);
    const fromClient = await shared.factory.connect();
    await Promise.all([fromClient.dispose(), shared.dispose()]);
    await shared.dispose();
    expect(counts.disposals).toBe(1);
  });

  it("when the client never connected, disposing still disposes the adapter", async () => {
    const { factory, counts } = countingFactory();
    const shared = await connectShared(factory);
    await shared.dispose();
    expect(counts.disposals).toBe(1);
  });
});
