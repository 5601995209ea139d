/** Jest global teardown: stops the PostgreSQL the global setup started (nothing for one it found). */
export default async function stop(): Promise<void> {
  await globalThis.deployChecksPostgres?.stop();
}
