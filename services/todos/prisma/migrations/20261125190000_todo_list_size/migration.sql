-- CreateTable
CREATE TABLE "TodoListSize" (
    "userId" VARCHAR(128) NOT NULL,
    "items" INTEGER NOT NULL DEFAULT 0,

    CONSTRAINT "TodoListSize_pkey" PRIMARY KEY ("userId")
);

-- Keeps "TodoListSize"."items" equal to the number of "TodoItem" rows of each user, whatever writes them:
-- the service's statements, an operator's SQL, TRUNCATE. The service's create checks the limit against it
-- under the row's lock (src/storage/prisma-repository.ts); this trigger only counts.
CREATE FUNCTION "todo_list_size_count"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' OR TG_OP = 'UPDATE' THEN
        UPDATE "TodoListSize" SET "items" = "items" - 1 WHERE "userId" = OLD."userId";
    END IF;
    IF TG_OP = 'INSERT' OR TG_OP = 'UPDATE' THEN
        INSERT INTO "TodoListSize" AS "size" ("userId", "items") VALUES (NEW."userId", 1)
        ON CONFLICT ("userId") DO UPDATE SET "items" = "size"."items" + 1;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION "todo_list_size_clear"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM "TodoListSize";
    RETURN NULL;
END
$$;

-- CREATE TRIGGER locks "TodoItem" against writes until this migration commits, so the counts below miss
-- no row written meanwhile by a replica still running the previous version.
CREATE TRIGGER "TodoItem_count" AFTER INSERT OR DELETE ON "TodoItem"
    FOR EACH ROW EXECUTE FUNCTION "todo_list_size_count"();
CREATE TRIGGER "TodoItem_count_owner" AFTER UPDATE OF "userId" ON "TodoItem"
    FOR EACH ROW WHEN (OLD."userId" IS DISTINCT FROM NEW."userId") EXECUTE FUNCTION "todo_list_size_count"();
CREATE TRIGGER "TodoItem_count_truncate" AFTER TRUNCATE ON "TodoItem"
    FOR EACH STATEMENT EXECUTE FUNCTION "todo_list_size_clear"();

-- The lists that exist already.
INSERT INTO "TodoListSize" ("userId", "items")
SELECT "userId", COUNT(*) FROM "TodoItem" GROUP BY "userId";
