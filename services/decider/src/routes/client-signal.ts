import type { Response } from "express";

/**
 * Runs `work` with a signal that aborts when the client goes away before its answer is written (its
 * connection closed): whatever the request waits for (the model server's start-up check, the queue, a slot)
 * stops waiting then, and nothing is sent upstream for it.
 */
export async function whileClientWaits<T>(res: Response, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const cancel = new AbortController();
  const onClose = () => {
    if (!res.writableEnded) cancel.abort();
  };
  res.on("close", onClose);
  try {
    return await work(cancel.signal);
  } finally {
    res.off("close", onClose);
  }
}
