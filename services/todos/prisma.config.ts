import path from "node:path";
import { defineConfig } from "prisma/config";

// The Prisma CLI is used here only for `prisma generate`, which needs no database: DATABASE_URL is read
// with a placeholder fallback because `env("DATABASE_URL")` throws when it is unset.
export default defineConfig({
  schema: path.join("prisma", "schema.prisma"),
  migrations: { path: path.join("prisma", "migrations") },
  datasource: { url: process.env.DATABASE_URL ?? "postgresql://localhost:5432/todos" },
});
