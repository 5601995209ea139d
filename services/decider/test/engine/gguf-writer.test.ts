import { GgufWriter } from "../../src/engine/demo/gguf-writer";

/** The tensor infos of a GGUF header without metadata, read back as llama.cpp reads them (u64 as BigInt). */
function tensorInfos(header: Buffer): { name: string; dims: bigint[]; type: number; offset: bigint }[] {
  expect(header.subarray(0, 4).toString("ascii")).toBe("GGUF");
  expect(header.readUInt32LE(4)).toBe(3);
  const count = Number(header.readBigUInt64LE(8));
  expect(header.readBigUInt64LE(16)).toBe(0n);
  let at = 24;
  const infos = [];
  for (let i = 0; i < count; i++) {
    const nameLength = Number(header.readBigUInt64LE(at));
    const name = header.subarray(at + 8, at + 8 + nameLength).toString("utf8");
    at += 8 + nameLength;
    const nDims = header.readUInt32LE(at);
    at += 4;
    const dims = Array.from({ length: nDims }, (_, d) => header.readBigUInt64LE(at + 8 * d));
    at += 8 * nDims;
    const type = header.readUInt32LE(at);
    const offset = header.readBigUInt64LE(at + 4);
    at += 12;
    infos.push({ name, dims, type, offset });
  }
  return infos;
}

describe("the GGUF writer", () => {
  it("writes u64 values past 2^32 whole: a tensor that starts after 4 GiB of data (a 7B model's)", () => {
    // Declared only: a tensor's data is asked for while the file is written, never for its header.
    const bigElements = 2 ** 31 + 16; // F16: 2^32 + 32 bytes
    const gguf = new GgufWriter()
      .tensor("big", [bigElements], "f16", () => {
        throw new Error("the header needs no data");
      })
      .tensor("after", [8, 3], "f32", () => new Float32Array(24));
    expect(tensorInfos(gguf.header())).toStrictEqual([
      { name: "big", dims: [BigInt(bigElements)], type: 1, offset: 0n },
      { name: "after", dims: [8n, 3n], type: 0, offset: 2n ** 32n + 32n },
    ]);
  });

  it("refuses a value a u64 of this writer cannot hold exactly", () => {
    const gguf = new GgufWriter().tensor("huge", [2 ** 53], "f32", () => new Float32Array(0));
    expect(() => gguf.header()).toThrow(/not a u64 this writer can encode/);
  });
});
