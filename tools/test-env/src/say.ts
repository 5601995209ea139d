/**
 * One line per preparation step, on stderr so it shows even when Jest buffers a suite's output, and
 * prefixed so a reader sees which part of the test run wrote it.
 */
export function sayer(topic: string): (message: string) => void {
  return (message) => process.stderr.write(`[test-env] ${topic}: ${message}\n`);
}
