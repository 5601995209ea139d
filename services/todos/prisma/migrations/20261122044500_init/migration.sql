-- CreateTable
CREATE TABLE "TodoItem" (
    "id" UUID NOT NULL,
    "userId" VARCHAR(128) NOT NULL,
    "title" VARCHAR(500) NOT NULL,
    "completed" BOOLEAN NOT NULL DEFAULT false,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "TodoItem_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "TodoItem_userId_createdAt_id_idx" ON "TodoItem"("userId", "createdAt", "id");
