/**
 * Jest global setup: the Redis the shared-limit suites use (the one at LOCALDECIDER_TEST_REDIS_URL, default
 * 127.0.0.1:6379, when it answers; else one started on a free loopback port) and the redis-server the tests
 * that need a Redis of their own start (the machine's, or Debian's packages), from @localdecider/test-env/redis.
 * The URL reaches every test file through LOCALDECIDER_TEST_REDIS_URL, the programs through the variables
 * exportRedisPrograms sets; the global teardown stops a server this run started.
 */
import { ensureRedis, exportRedisPrograms, type RedisServer } from "@localdecider/test-env/redis";

declare global {
  // Handed from the global setup to the global teardown (Jest runs both in its parent process).
  var deciderTestRedis: RedisServer | undefined;
}

export default async function prepareRedis(): Promise<void> {
  await exportRedisPrograms();
  const server = await ensureRedis();
  globalThis.deciderTestRedis = server;
  process.env.LOCALDECIDER_TEST_REDIS_URL = server.url;
}
