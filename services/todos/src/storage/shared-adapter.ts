import type { SqlDriverAdapter, SqlDriverAdapterFactory } from "@prisma/driver-adapter-utils";

export interface SharedAdapter {
  /** Give this to the Prisma client: its connect() hands over `adapter` instead of making another. */
  factory: SqlDriverAdapterFactory;
  /** The one connected driver adapter, for the repository's list (see PrismaTodoRepository.list). */
  adapter: SqlDriverAdapter;
  /**
   * Disposes the adapter (adapter-pg: ends the pool), once. Call it after $disconnect: the client disposes
   * the adapter only if it ever connected, i.e. ran a query itself, which a process that only listed never
   * did; and adapter-pg's dispose fails when run twice.
   */
  dispose: () => Promise<void>;
}

/**
 * Connects a driver adapter once and lets the Prisma client use that same adapter, so the statements the
 * repository sends through the adapter itself share the client's pool (or PGlite instance), its type
 * parsers and its prepared statement names.
 */
export async function connectShared(factory: SqlDriverAdapterFactory): Promise<SharedAdapter> {
  const adapter = await factory.connect();
  const disposeOnce = adapter.dispose.bind(adapter);
  let disposed: Promise<void> | undefined;
  // The client calls adapter.dispose() on $disconnect, so the instance's own method is made idempotent.
  adapter.dispose = () => {
    disposed ??= disposeOnce();
    return disposed;
  };
  return {
    adapter,
    factory: { provider: factory.provider, adapterName: factory.adapterName, connect: async () => adapter },
    dispose: () => adapter.dispose(),
  };
}
