/** Polls until check() is true or the timeout passes (then throws with the label). */
export async function waitFor(
  check: () => Promise<boolean> | boolean,
  opts: { timeoutMs?: number; label?: string } = {},
) {
  const deadline = Date.now() + (opts.timeoutMs ?? 15_000);
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${opts.label ?? 'condition'}`);
}
