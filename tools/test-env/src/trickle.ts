/**
 * A client that trickles a request, for the services' tests of their connection limits (headers and request
 * timeouts) against the built process: it sends a first part, then one byte every 100 ms, and answers with
 * all the server wrote once the server closes the connection. At most 40 bytes (4 s) are dripped: a server
 * that never closes fails the test instead of hanging it.
 */
import { connect } from "node:net";

/** Sends `first` to 127.0.0.1:`port`, then "a" every 100 ms; `server` names it in the error if it never closes. */
export function trickle(port: number, first: string, server: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(first));
    let text = "";
    let sent = 0;
    const drip = setInterval(() => {
      if (sent++ >= 40) {
        clearInterval(drip);
        socket.destroy();
        reject(new Error(`${server} kept a trickling connection open`));
      } else socket.write("a");
    }, 100);
    socket.on("data", (chunk) => {
      text += String(chunk);
    });
    socket.on("error", () => undefined);
    socket.on("close", () => {
      clearInterval(drip);
      resolve(text);
    });
  });
}
