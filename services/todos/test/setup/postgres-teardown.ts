/** Jest global teardown: stops the PostgreSQL server the global setup started (nothing for one it found). */
export default async function stopPostgres(): Promise<void> {
  await globalThis.todosTestPostgres?.stop();
}
