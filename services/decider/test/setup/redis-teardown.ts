/** Jest global teardown: stops the Redis the global setup started (nothing for one it found). */
export default async function stopRedis(): Promise<void> {
  await globalThis.deciderTestRedis?.stop();
}
