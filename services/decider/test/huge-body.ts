import type { ServerResponse } from "node:http";

/**
 * A 200 of `bytes` bytes with no Content-Length (chunked, as a streaming server sends it): a JSON object whose
 * `pad` string fills the rest. Written as the socket drains, and stopped as soon as the client closes it, so
 * a client that stops reading early is seen to (`written` short of `bytes`).
 */
export async function streamHugeAnswer(res: ServerResponse, bytes: number): Promise<{ written: number }> {
  res.writeHead(200, { "content-type": "application/json" });
  const head = Buffer.from('{"answers":{},"pad":"');
  const tail = Buffer.from('"}');
  const chunk = Buffer.alloc(64 * 1024, "x");
  let written = 0;
  const write = (data: Buffer) =>
    new Promise<boolean>((resolve) => {
      if (res.destroyed || res.writableEnded) return resolve(false);
      written += data.byteLength;
      if (res.write(data)) return resolve(true);
      const done = (ok: boolean) => {
        res.off("drain", onDrain);
        res.off("close", onClose);
        resolve(ok);
      };
      const onDrain = () => done(true);
      const onClose = () => done(false);
      res.on("drain", onDrain);
      res.on("close", onClose);
    });
  if (!(await write(head))) return { written };
  for (let left = bytes - head.byteLength - tail.byteLength; left > 0; left -= chunk.byteLength) {
    if (!(await write(left >= chunk.byteLength ? chunk : chunk.subarray(0, left)))) return { written };
  }
  if (await write(tail)) res.end();
  return { written };
}
