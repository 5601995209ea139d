import type { TodoItem } from "@localdecider/contracts/todos";
import type { TodoRecord } from "../storage/repository";

/** A stored record as the API shows it: the contract's TodoItem, times as ISO 8601 in UTC. */
export function toItem(record: TodoRecord): TodoItem {
  return {
    id: record.id,
    title: record.title,
    completed: record.completed,
    createdAt: record.createdAt.toISOString(),
    updatedAt: record.updatedAt.toISOString(),
  };
}
