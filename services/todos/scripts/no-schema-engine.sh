#!/bin/sh
# Stand-in for Prisma's native schema engine, which the Prisma CLI tries to download from a host these
# machines cannot reach. `prisma generate` does not need the engine; every `prisma migrate`/`prisma db`
# command does, and must fail loudly rather than report success having changed nothing (which is what
# pointing PRISMA_SCHEMA_ENGINE_BINARY at /bin/true would do). Migrations are applied by
# src/storage/migrate.ts instead; see README.md, "Migrations".
echo "prisma schema engine is not available here: migrations are applied by the service itself (src/storage/migrate.ts); see services/todos/README.md" >&2
exit 1
