-- The list's order becomes "seq", a number the create takes while it holds the user's count row lock
-- (src/storage/prisma-repository.ts), so the order pages are read in is the order items commit in: a cursor
-- never passes an item that commits later. Before, the order was ("createdAt", "id"), and "createdAt" was set
-- before the create waited for that lock, so an item could commit after one that sorts later (issue 35).

-- AlterTable
ALTER TABLE "TodoItem" ADD COLUMN "seq" BIGSERIAL NOT NULL;

-- The items that exist keep the order they were listed in: numbered by ("createdAt", "id") across all users
-- (each user's list is a subsequence of it), and the sequence continues after the highest number.
UPDATE "TodoItem" AS "item" SET "seq" = "ordered"."n"
FROM (SELECT "id", row_number() OVER (ORDER BY "createdAt", "id") AS "n" FROM "TodoItem") AS "ordered"
WHERE "item"."id" = "ordered"."id";
SELECT setval(pg_get_serial_sequence('"TodoItem"', 'seq'), COALESCE((SELECT max("seq") FROM "TodoItem"), 0) + 1, false);

-- DropIndex
DROP INDEX "TodoItem_userId_createdAt_id_idx";

-- CreateIndex
CREATE INDEX "TodoItem_userId_seq_idx" ON "TodoItem"("userId", "seq");
